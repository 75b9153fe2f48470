#!/usr/bin/env bash
# A/B of the fused decode chunk ramp (2× vs 1.5× growth per chunk) in one lease: the npm package
# through Dawn in Node (bench/dawn-cpuprof.mjs without a profile) and the native CLI, builds
# alternating twice. Calls: PART=1 (carry .bench-carry/smollm2.part00), PART=2
# (.bench-carry/smollm2.part01), then PART=3 (carry .gl, .bench-carry/dist-x2, .bench-carry/dist-x15,
# .bench-carry/bin with fuselm-x2.xz and fuselm-final.xz, .bench-carry/dawn).
set -euo pipefail
source bench/gpu-model.sh
source bench/dawn-unpack.sh
for b in x2 final; do xz -dc .bench-carry/bin/fuselm-$b.xz > $D/fuselm-$b; chmod +x $D/fuselm-$b; done
for round in 1 2; do
  for v in x2 x15; do
    RUNS=5 $D/node bench/dawn-cpuprof.mjs $D/package $M .bench-carry/dist-$v | tee -a "$OUT/dawn-$v.txt"
  done
  for b in x2 final; do
    for i in 1 2 3; do
      $D/fuselm-$b generate --model $M --prompt "Once upon a time, there was a little robot who" \
        --max-tokens 128 --strategy fused --json > /tmp/n.json
      python3 -c "import json; t=json.load(open('/tmp/n.json'))['timings']; g=t['generate']; print('native-$b', round(g['decodeTokensPerSecond'],1), 'tok/s, TTFT', round(g['prefillSeconds']*1e3,2), 'ms')" | tee -a "$OUT/native-$b.txt"
    done
  done
done
