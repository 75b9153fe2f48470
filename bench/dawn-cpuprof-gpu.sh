#!/usr/bin/env bash
# A V8 CPU profile of fused decode through the npm package on Dawn in Node (bench/dawn-cpuprof.mjs),
# with Dawn's per-call costs and round trip (bench/dawn-calls.mjs), on the lent GPU. Calls:
# PART=1 (carry .bench-carry/smollm2.part00), PART=2 (.bench-carry/smollm2.part01), then PART=3
# (carry .gl, .bench-carry/dist-prof — dist/ with the wasm from wasm-pack before wasm-opt, so its
# functions keep their names — and .bench-carry/dawn).
set -euo pipefail
if [ "${PART:-3}" = 2 ]; then
  mkdir -p /root/fuselm-model; cp .bench-carry/smollm2.part01 /root/fuselm-model/; exit 0
fi
source bench/gpu-model.sh
D=/root/dawn; mkdir -p $D; xz -dc .bench-carry/dawn/node.xz > $D/node; chmod +x $D/node
tar xJf .bench-carry/dawn/dawn-linux-x64.tar.xz -C $D
$D/node bench/dawn-calls.mjs $D/package "$OUT/dawn-calls.json"
P=/tmp/fused-decode.cpuprofile
$D/node bench/dawn-cpuprof.mjs $D/package $M .bench-carry/dist-prof $P
$D/node bench/dawn-cpuprof.mjs --summarise "$P" "$OUT/cpuprof-summary.json"
xz -c "$P" > "$OUT/fused-decode.cpuprofile.xz"
