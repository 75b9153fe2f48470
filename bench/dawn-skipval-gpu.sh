#!/usr/bin/env bash
# How much of Dawn's host time per token is its validation: fused decode through the npm package
# (dist/, from .bench-carry/dist-new) with and without Dawn's `skip_validation` toggle (a
# diagnostic only: browsers never skip validation), rounds alternating, node pinned to two cores.
# Model in two calls (PART=1, PART=2), then this call with .gl, .bench-carry/dawn and
# .bench-carry/dist-new.
source bench/gpu-model.sh
source bench/dawn-unpack.sh
exec > >(tee -a "$OUT/log.txt") 2>&1
rm -rf dist && cp -r .bench-carry/dist-new dist
for round in $(seq "${ROUNDS:-3}"); do
  for toggle in "" skip_validation; do
    echo "validation ${toggle:-on}:"
    DAWN_ENABLE=$toggle RUNS=5 STRATEGIES=fused SKIP_CHAT=1 taskset -c 2,3 $D/node bench/dawn-bench.mjs $D/package $M \
      "$OUT/bench-${toggle:-validation}-$round.json" 2>&1 | grep "^dawn fused"
  done
done
