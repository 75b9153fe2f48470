#!/usr/bin/env bash
# Tint's SPIR-V for the fused kernels on the lent GPU (bench/dawn-dump-shaders.mjs): Dawn's log
# comes back as $OUT/dawn-shaders.log.xz. Model in two calls (PART=1, PART=2), then this call
# with .gl, .bench-carry/dawn and dist.
source bench/gpu-model.sh
source bench/dawn-unpack.sh
$D/node bench/dawn-dump-shaders.mjs $D/package dist $M > /root/dawn-shaders.log 2>&1 || true
tail -3 /root/dawn-shaders.log
xz -c /root/dawn-shaders.log > $OUT/dawn-shaders.log.xz
ls -la $OUT
