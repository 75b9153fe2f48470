#!/usr/bin/env bash
# A V8 CPU profile of fused decode through the npm package on Dawn in Node (bench/dawn-cpuprof.mjs),
# with Dawn's per-call costs and round trip (bench/dawn-calls.mjs), on the lent GPU. Calls:
# PART=1 (carry .bench-carry/smollm2.part00), PART=2 (.bench-carry/smollm2.part01), then PART=3
# (carry .gl, .bench-carry/dist-prof — dist/ with the wasm from wasm-pack before wasm-opt, so its
# functions keep their names — and .bench-carry/dawn).
set -euo pipefail
source bench/gpu-model.sh
source bench/dawn-unpack.sh
$D/node bench/dawn-calls.mjs $D/package "$OUT/dawn-calls.json"
P=/tmp/fused-decode.cpuprofile
$D/node bench/dawn-cpuprof.mjs $D/package $M .bench-carry/dist-prof $P
$D/node bench/dawn-cpuprof.mjs --summarise "$P" "$OUT/cpuprof-summary.json"
xz -c "$P" > "$OUT/fused-decode.cpuprofile.xz"
