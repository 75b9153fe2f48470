#!/usr/bin/env bash
# Issue 9's toy-grid crossover through the npm package on Dawn in Node, on the lent GPU. One call,
# no model: carry .gl, dist (npm run build) and .bench-carry/dawn (node.xz, dawn-linux-x64.tar.xz:
# see bench/dawn-gpu.sh). Writes $OUT/bench-dawn-toy.json.
set -euo pipefail
source bench/gpu-vulkan.sh
source bench/dawn-unpack.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$D/node bench/megakernel-dawn.mjs $D/package "$OUT/bench-dawn-toy.json"
