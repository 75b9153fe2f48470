#!/usr/bin/env bash
# The simulation benchmark natively and through the npm package on Dawn in Node, same lease,
# same grid (populations 1,000 and 10,000 × episodes 200, 500, 1,500; Pendulum and Acrobot; a
# 16-unit tanh MLP): the browser path's tax is Dawn's generations/s over native's, per
# configuration. Carry .gl, dist (scripts/build-npm), .bench-carry/dawn (node.xz,
# dawn-linux-x64.tar.xz) and .bench-carry/sim (fuselm.xz, release, built here).
# Results: $OUT/sim-bench-native.json, $OUT/sim-bench-dawn.json, $OUT/sim-browser-tax.txt.
set -euo pipefail
source bench/gpu-vulkan.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
xz -dc .bench-carry/sim/fuselm.xz > /root/fuselm; chmod +x /root/fuselm
source bench/dawn-unpack.sh
RUNS=${RUNS:-5}
/root/fuselm sim-bench --runs $RUNS --out "$OUT/sim-bench-native.json" 2>/dev/null
RUNS=$RUNS $D/node bench/sim-dawn.mjs $D/package "$OUT/sim-bench-dawn.json" > /dev/null
python3 bench/sim-tax.py "$OUT/sim-bench-native.json" "$OUT/sim-bench-dawn.json" | tee "$OUT/sim-browser-tax.txt"
