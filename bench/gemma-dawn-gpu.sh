#!/usr/bin/env bash
# Gemma 3 270M through the npm package on Dawn in Node on the lent GPU (bench/gemma-dawn.mjs:
# both strategies against the exact reference, decode speed). The model travels first
# (bench/gemma-model.sh: PART=0..3, then `bash bench/gemma-model.sh` carrying
# .bench-carry/gemma/gemma.part04), then this call carries .gl, dist (scripts/build-npm) and
# .bench-carry/dawn (node.xz, dawn-linux-x64.tar.xz). Result: $OUT/gemma3-dawn.json.
source bench/gemma-model.sh
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
f=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f $f ]; then export VK_DRIVER_FILES=$f; fi
D=/root/dawn; mkdir -p $D; xz -dc .bench-carry/dawn/node.xz > $D/node; chmod +x $D/node
tar xJf .bench-carry/dawn/dawn-linux-x64.tar.xz -C $D
$D/node bench/gemma-dawn.mjs $D/package $M "$OUT/gemma3-dawn.json"
