#!/usr/bin/env bash
# The megakernel, two builds side by side on the lent GPU, one lease: the synthetic-model tests
# of the new build (its subgroup reductions run only where subgroups are 32 wide, so not on
# lavapipe); the toy grid (unfused, fused, megakernel) for old, new and new with
# FUSELM_NO_SUBGROUPS=1, ROUNDS (default 2) alternating; SmolLM2 with the grid megakernel
# (fused, megakernel, megakernel-grid) for old and new; the exact-reference test of the new
# build with FUSELM_EXACT_ALL=1 (every strategy, all ten prompts). Build here and carry
# .bench-carry/mk (fuselm-old.xz, fuselm-new.xz, model_synthetic.xz, generate_smollm2.xz) and
# .gl; the model in two calls (bench/gpu-model.sh): PART=1, then this call with
# .bench-carry/smollm2.part01 too. SKIP_EXACT=1 leaves the exact-reference test out; TOY_ONLY=1
# runs only the tests and the toy grid (no model to carry).
set -euo pipefail
if [ "${TOY_ONLY:-}" = 1 ]; then source bench/gpu-vulkan.sh; else source bench/gpu-model.sh; fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /root/mk "$OUT/mk"
for x in .bench-carry/mk/*.xz; do n=$(basename "$x" .xz); xz -dc "$x" > /root/mk/$n; chmod +x /root/mk/$n; done
/root/mk/model_synthetic > "$OUT/mk/model_synthetic.log" 2>&1 && echo "model_synthetic: passed" \
  || { echo "model_synthetic: FAILED"; tail -30 "$OUT/mk/model_synthetic.log"; }
toy_line() { # json, name
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
by = {}
for r in d["results"]:
    by.setdefault(r["workload"].split(",")[0].replace("toy ", ""), {})[r["strategy"]] = r
cells = []
for w, s in by.items():
    u = s["unfused"]["decodeTokensPerSecond"]["median"]
    m = s["megakernel"]["decodeTokensPerSecond"]["median"]
    f = s["fused"]["decodeTokensPerSecond"]["median"]
    same = all(r.get("idsEqualAcrossStrategies", True) for r in s.values())
    cells.append("%s mk %d (%.1fx) fu %.1fx%s" % (w, m, m / u, f / u, "" if same else " IDS-DIFFER"))
print("%-10s %s" % (sys.argv[2], " | ".join(cells)))
PY
}
for round in $(seq "${ROUNDS:-2}"); do
  for b in ${BUILDS:-old new nosg}; do
    bin=/root/mk/fuselm-$b; env=()
    [ $b = nosg ] && { bin=/root/mk/fuselm-new; env=(FUSELM_NO_SUBGROUPS=1); }
    json="$OUT/mk/toy-$b-$round.json"
    env "${env[@]}" $bin bench --toy --runs "${RUNS:-5}" --strategies unfused,fused,megakernel --out "$json" >/dev/null 2>&1 \
      && toy_line "$json" "$b-$round" || echo "$b-$round toy bench failed"
  done
done
[ "${TOY_ONLY:-}" = 1 ] && exit 0
for b in old new; do
  json="$OUT/mk/smollm2-$b.json"
  /root/mk/fuselm-$b bench --model "$M" --grid --no-long --runs 3 --strategies fused,megakernel,megakernel-grid --out "$json" >/dev/null 2>&1 \
    && python3 - "$json" "$b" <<'PY' || echo "$b smollm2 bench failed"
import json, sys
d = json.load(open(sys.argv[1]))["report"]
print("%-5s SmolLM2 " % sys.argv[2] + " ".join("%s/%s=%d" % (r["strategy"], r["workload"].split(",")[0], round(r["decodeTokensPerSecond"]["median"])) for r in d["results"]))
PY
done
if [ "${SKIP_EXACT:-}" != 1 ]; then
  mkdir -p models && ln -sf $M models/SmolLM2-135M-Instruct.Q4_1.gguf
  [ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
  FUSELM_EXACT_ALL=1 /root/mk/generate_smollm2 --nocapture > "$OUT/mk/exact-gpu.log" 2>&1 && echo "exact reference: passed" \
    || { echo "exact reference: FAILED"; tail -30 "$OUT/mk/exact-gpu.log"; }
fi
