#!/usr/bin/env bash
# Issue 9's planner on the lent GPU, one call, no model: the toy grid natively (`fuselm bench
# --toy`: every strategy, the planner's pick marked, warning rows where it was not fastest) and
# through the npm package on Dawn in Node (bench/megakernel-dawn.mjs), then `fuselm generate
# --calibrate` on the synthetic model. Carry .gl, dist (npm run build), .bench-carry/bin
# (fuselm-final.xz: target/release/fuselm) and .bench-carry/dawn (node.xz, dawn-linux-x64.tar.xz:
# see bench/dawn-gpu.sh). Writes $OUT/toy-native.json, $OUT/bench-dawn-toy.json, $OUT/calibrate.txt.
set -euo pipefail
source bench/gpu-vulkan.sh
source bench/dawn-unpack.sh
xz -dc .bench-carry/bin/fuselm-final.xz > $D/fuselm; chmod +x $D/fuselm
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$D/fuselm bench --toy --runs "${RUNS:-5}" --out "$OUT/toy-native.json" 2>&1 | tail -n 40
$D/node bench/megakernel-dawn.mjs $D/package "$OUT/bench-dawn-toy.json" | tail -n 40
$D/fuselm synthetic-model $D/synthetic.gguf
for i in 1 2 3; do
  $D/fuselm generate --model $D/synthetic.gguf --prompt Hello --max-tokens 64 --calibrate --json 2>> "$OUT/calibrate.txt" > /dev/null
done
grep -o '\[strategy [^]]*\]' "$OUT/calibrate.txt"
