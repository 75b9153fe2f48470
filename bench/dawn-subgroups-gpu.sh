#!/usr/bin/env bash
# The package with subgroups in the browser (dist-b) against the package before (dist-a) on the
# lent GPU through Dawn in Node, next to the native CLI, one lease: the probe's features, the
# Node test on the real model (dist-b), the fused step's profile of both builds (two rounds),
# then bench/dawn-bench.mjs (dist-b) and `fuselm generate` natively, 3 runs per strategy.
# Model in two calls (PART=1, PART=2), then this call with .gl, .bench-carry/dawn,
# .bench-carry/dist-a, .bench-carry/dist-b and .bench-carry/bin (fuselm-final.xz).
source bench/gpu-model.sh
source bench/dawn-unpack.sh
exec > >(tee -a "$OUT/log.txt") 2>&1
xz -dc .bench-carry/bin/fuselm-final.xz > $D/fuselm; chmod +x $D/fuselm
for d in a b; do
  rm -rf dist && cp -r .bench-carry/dist-$d dist
  echo -n "dist-$d probe: "
  $D/node --input-type=module -e "
    import { loadFuselm } from './bench/dawn-env.mjs';
    const f = await loadFuselm('$D/package', 'dist');
    const r = await f.probe({});
    console.log(JSON.stringify(r.features), JSON.stringify(r.fit));" 2>&1 | grep -v "^Warning\|^ - \|^    at\|^$"
done
FIXTURE=tests/fixtures/exact/smollm2/exact_greedy.jsonl $D/node bench/gemma-dawn.mjs $D/package $M "$OUT/smollm2-dawn-exact.json" 2>&1 | grep -v "^Warning\|^ - \|^    at\|^$"
FUSELM_DAWN_DIR=$D/package FUSELM_NODE_MODEL=$M $D/node --test tests/node/ > "$OUT/node-test.txt" 2>&1 || true
grep -E "^(not )?ok|^# (tests|pass|fail|skipped)" "$OUT/node-test.txt"
for round in 1 2; do
  for d in a b; do
    rm -rf dist && cp -r .bench-carry/dist-$d dist
    echo -n "dist-$d "
    PROFILE_ONLY=1 $D/node bench/dawn-bench.mjs $D/package $M /dev/null 2>&1 | grep "^dawn"
  done
done
RUNS=${RUNS:-5} $D/node bench/dawn-bench.mjs $D/package $M "$OUT/bench-dawn.json" 2>&1 | grep -v "^Warning\|^ - \|^    at\|^$"
for s in unfused fused; do
  for i in 1 2 3; do
    $D/fuselm generate --model $M --prompt "Once upon a time, there was a little robot who" \
      --max-tokens 128 --strategy $s --json > "$OUT/native-$s-$i.json"
  done
  python3 -c "import json,sys; r=[json.load(open(f'$OUT/native-$s-{i}.json')) for i in (1,2,3)]; print('native', '$s', [round(x['timings']['generate']['decodeTokensPerSecond'],1) for x in r], len(r[0]['generatedIds']), 'tok')"
done
for v in "" 1; do
  FUSELM_NO_SUBGROUPS=$v $D/fuselm bench --model "$M" --strategies fused --profile --no-long --runs 3 --out /root/nsg.json >/dev/null 2>&1
  python3 - /root/nsg.json "FUSELM_NO_SUBGROUPS=$v" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
tok = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"]]
p = d["profile"][0]
roles = " ".join("%s=%.2f" % (r["role"].split("+")[0], r["microsecondsPerStep"] / r["dispatchesPerStep"]) for r in p["roles"])
print("native %s fused tok/s %s step %.0f us  %s" % (sys.argv[2], tok, p["stepMicroseconds"], roles))
PY
done
