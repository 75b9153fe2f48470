#!/usr/bin/env bash
# Dawn toggles vs the package's fused step on the lent GPU: bench/dawn-bench.mjs in
# PROFILE_ONLY mode once per toggle set given as arguments ("" = Dawn's defaults), same lease.
# Model in two calls as bench/dawn-gpu.sh (PART=1, PART=2), then this call with .gl, dist and
# .bench-carry/dawn. Example: bench/dawn-toggles-gpu.sh "" disable_robustness
source bench/gpu-model.sh
source bench/dawn-unpack.sh
for round in 1 2; do
  for toggles in "$@"; do
    DAWN_ENABLE=$toggles PROFILE_ONLY=1 $D/node bench/dawn-bench.mjs $D/package $M /dev/null
  done
done
