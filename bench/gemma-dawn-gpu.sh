#!/usr/bin/env bash
# Gemma 3 270M through the npm package on Dawn in Node on the lent GPU (bench/gemma-dawn.mjs:
# both strategies against the exact reference, decode speed). The model travels first
# (bench/gemma-model.sh: PART=0..3, then `bash bench/gemma-model.sh` carrying
# .bench-carry/gemma/gemma.part04), then this call carries .gl, dist (scripts/build-npm) and
# .bench-carry/dawn (node.xz, dawn-linux-x64.tar.xz). Result: $OUT/gemma3-dawn.json.
source bench/gemma-model.sh
source bench/gpu-vulkan.sh
source bench/dawn-unpack.sh
$D/node bench/gemma-dawn.mjs $D/package $M "$OUT/gemma3-dawn.json"
