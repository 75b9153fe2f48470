#!/usr/bin/env bash
# bench/dawn-chunks.mjs for the `old` and `new` packages, alternating (one node process each,
# ROUNDS_OUTER times), one lease. Model in two calls (PART=1, PART=2), then this call with .gl,
# .bench-carry/dawn, .bench-carry/dist-old and .bench-carry/dist-new.
source bench/gpu-model.sh
source bench/dawn-unpack.sh
exec > >(tee -a "$OUT/log.txt") 2>&1
for round in $(seq "${ROUNDS_OUTER:-2}"); do
  for v in old new; do
    rm -rf dist && cp -r .bench-carry/dist-$v dist
    echo "dawn $v, round $round:"
    $D/node bench/dawn-chunks.mjs $D/package $M "$OUT/chunks-$v-$round.json" 2>&1 | grep "^chunks"
  done
done
