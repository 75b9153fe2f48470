#!/usr/bin/env bash
# Issue 9's toy-grid crossover through the npm package on Dawn in Node, on the lent GPU. One call,
# no model: carry .gl, dist (npm run build) and .bench-carry/dawn (node.xz, dawn-linux-x64.tar.xz:
# see bench/dawn-gpu.sh). Writes $OUT/bench-dawn-toy.json.
set -euo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
f=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f $f ]; then export VK_DRIVER_FILES=$f; fi
D=/root/dawn; mkdir -p $D; xz -dc .bench-carry/dawn/node.xz > $D/node; chmod +x $D/node
tar xJf .bench-carry/dawn/dawn-linux-x64.tar.xz -C $D
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$D/node bench/megakernel-dawn.mjs $D/package "$OUT/bench-dawn-toy.json"
