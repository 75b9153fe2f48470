#!/usr/bin/env bash
# Multi-turn chat time to first token on the lent GPU, KV-prefix reuse on vs off: natively
# (examples chat_ttft) and through the npm package on Dawn in Node (bench/dawn-bench.mjs, which
# also re-measures decode). Calls as for bench/dawn-gpu.sh: PART=1 (carry
# .bench-carry/smollm2.part00), PART=2 (.bench-carry/smollm2.part01), then PART=3 (carry .gl, dist,
# .bench-carry/bin with chat_ttft.xz, .bench-carry/dawn).
set -euo pipefail
source bench/gpu-model.sh
source bench/dawn-unpack.sh
xz -dc .bench-carry/bin/chat_ttft.xz > $D/chat_ttft; chmod +x $D/chat_ttft
$D/chat_ttft $M "${RUNS:-5}" "$OUT/chat-ttft-native.json"
RUNS=${RUNS:-5} $D/node bench/dawn-bench.mjs $D/package $M "$OUT/bench-dawn.json"
