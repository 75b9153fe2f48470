#!/usr/bin/env bash
# The simulation benchmark's browser-path tax across builds, one lease: native `fuselm sim-bench`
# (this build), then `simBench()` through the npm package on Dawn in Node, full grid, for the
# build before pooled readback buffers (.bench-carry/dist-x2, "old"), with them
# (.bench-carry/dist-pool, "pool"; only if carried) and this one (dist, "new"); then this one
# without Dawn's robustness (diagnosis only). One call: carry .gl, dist, .bench-carry/dist-x2,
# [.bench-carry/dist-pool], .bench-carry/dawn and .bench-carry/bin (fuselm-final.xz).
# Results: $OUT/sim-bench-native.json, $OUT/sim-bench-dawn-*.json and the tax tables.
set -euo pipefail
source bench/gpu-vulkan.sh
xz -dc .bench-carry/bin/fuselm-final.xz > /root/fuselm; chmod +x /root/fuselm
source bench/dawn-unpack.sh
RUNS=${RUNS:-5}
/root/fuselm sim-bench --runs $RUNS --out "$OUT/sim-bench-native.json" 2>/dev/null
DIST=.bench-carry/dist-x2 RUNS=$RUNS $D/node bench/sim-dawn.mjs $D/package "$OUT/sim-bench-dawn-old.json" > /dev/null
builds="old"
if [ -d .bench-carry/dist-pool ]; then
  DIST=.bench-carry/dist-pool RUNS=$RUNS $D/node bench/sim-dawn.mjs $D/package "$OUT/sim-bench-dawn-pool.json" > /dev/null
  builds="$builds pool"
fi
RUNS=$RUNS $D/node bench/sim-dawn.mjs $D/package "$OUT/sim-bench-dawn-new.json" > /dev/null
# Diagnosis only (browsers always keep robustness on): this build without Dawn's bounds clamping.
DAWN_ENABLE=disable_robustness RUNS=$RUNS $D/node bench/sim-dawn.mjs $D/package "$OUT/sim-bench-dawn-new-norobust.json" > /dev/null
for v in $builds new new-norobust; do
  echo "== Dawn build: $v"
  python3 bench/sim-tax.py "$OUT/sim-bench-native.json" "$OUT/sim-bench-dawn-$v.json" | tee "$OUT/sim-browser-tax-$v.txt"
done
