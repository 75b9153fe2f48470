#!/usr/bin/env bash
# Two builds side by side in one lease (`old` and `new`): natively (the fused step's profile,
# `fuselm bench` and `fuselm generate` with the host's recording time) and through the npm
# package on Dawn in Node (the fused step's profile, then fused decode with the host's recording
# time), builds alternating; then the new package against SmolLM2's float64 exact reference
# through Dawn, and tests/node. First used for the layer-indexed bind groups (2026-11-25, old =
# d953266), since for the attention preloads and the chunk ramp.
# Model in two calls (PART=1, PART=2), then this call with .gl, .bench-carry/dawn,
# .bench-carry/dist-old, .bench-carry/dist-new and .bench-carry/bin (fuselm-old.xz, fuselm-new.xz).
source bench/gpu-model.sh
source bench/dawn-unpack.sh
exec > >(tee -a "$OUT/log.txt") 2>&1
for v in $( [ "${DAWN_ONLY:-}" = 1 ] || echo old new ); do
  xz -dc .bench-carry/bin/fuselm-$v.xz > $D/fuselm-$v
  chmod +x $D/fuselm-$v
done
P="Once upon a time, there was a little robot who"
# DAWN_ONLY=1: only the Dawn rounds (ROUNDS of them, default 2), each node process pinned to one
# core with PIN=<core> (the host's run-to-run spread is larger than the effect otherwise).
RUN=""
if [ -n "${PIN:-}" ]; then RUN="taskset -c $PIN"; fi
for round in $( [ "${DAWN_ONLY:-}" = 1 ] || echo 1 2 ); do
  for v in old new; do
    json="$OUT/native-profile-$v-$round.json"
    $D/fuselm-$v bench --model $M --strategies fused --profile --no-long --runs 3 --out $json >/dev/null 2>&1
    python3 - "$json" "$v" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
p = d["profile"][0]
tok = ["%s=%d" % (r["workload"], round(r["decodeTokensPerSecond"]["median"])) for r in d["results"]]
print("native %s profile: fused step %.0f us; bench %s" % (sys.argv[2], p["stepMicroseconds"], " ".join(tok)))
PY
    for i in 1 2 3; do
      $D/fuselm-$v generate --model $M --prompt "$P" --max-tokens 128 --strategy fused --json > /tmp/g.json
      python3 -c "import json; t=json.load(open('/tmp/g.json'))['timings']; g=t['generate']; n=len(json.load(open('/tmp/g.json'))['generatedIds']); print('native $v generate: %.0f tok/s, host record %.0f us/token, %d tok' % (g['decodeTokensPerSecond'], g.get('recordSeconds', t.get('recordSeconds', 0))*1e6/max(1,n-1), n))" || python3 -c "import json; print(json.load(open('/tmp/g.json'))['timings'])"
    done
  done
done
for round in $(seq "${ROUNDS:-2}"); do
  for v in old new; do
    rm -rf dist && cp -r .bench-carry/dist-$v dist
    echo -n "dawn $v "
    PROFILE_ONLY=1 $RUN $D/node bench/dawn-bench.mjs $D/package $M /dev/null 2>&1 | grep "^dawn"
    echo "dawn $v decode:"
    RUNS=5 STRATEGIES=fused SKIP_CHAT=1 $RUN $D/node bench/dawn-bench.mjs $D/package $M "$OUT/bench-dawn-$v-$round.json" 2>&1 | grep "^dawn"
  done
done
[ "${DAWN_ONLY:-}" = 1 ] && exit 0
rm -rf dist && cp -r .bench-carry/dist-new dist
FIXTURE=tests/fixtures/exact/smollm2/exact_greedy.jsonl $D/node bench/gemma-dawn.mjs $D/package $M "$OUT/smollm2-dawn-exact.json" 2>&1 | grep -v "^Warning\|^ - \|^    at\|^$"
FUSELM_DAWN_DIR=$D/package FUSELM_NODE_MODEL=$M $D/node --test tests/node/ 2>&1 | tee "$OUT/node-test.txt" | grep -E "^(not )?ok|^# (tests|pass|fail|skipped)" || true
