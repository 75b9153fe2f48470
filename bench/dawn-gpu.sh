#!/usr/bin/env bash
# The npm package on the lent GPU through Dawn in Node, next to the native CLI on the same
# prompts in the same lease (`fuselm generate --json`, both strategies). Three calls while the
# machine is warm: PART=1 (carry .bench-carry/smollm2.part00), PART=2 (.bench-carry/smollm2.part01),
# then PART=3 (carry .gl, dist, .bench-carry/bin with fuselm-final.xz, .bench-carry/dawn — node.xz
# and dawn-linux-x64.tar.xz, the `webgpu` package's index.js, package.json and dist/linux-x64).
# PART=3 also works right after bench/final-gpu.sh in the same lease (the model is in place).
set -euo pipefail
source bench/gpu-model.sh
source bench/dawn-unpack.sh
xz -dc .bench-carry/bin/fuselm-final.xz > $D/fuselm; chmod +x $D/fuselm
# The Node test of the package (tests/node), on the real model streamed from disk.
FUSELM_DAWN_DIR=$D/package FUSELM_NODE_MODEL=$M $D/node --test tests/node/ 2>&1 | tee "$OUT/node-test.txt" | grep -E "^(not )?ok|^# (dawn|tests|pass|fail|skipped)" || true
RUNS=${RUNS:-5} $D/node bench/dawn-bench.mjs $D/package $M "$OUT/bench-dawn.json"
for s in unfused fused; do
  for i in 1 2 3; do
    $D/fuselm generate --model $M --prompt "Once upon a time, there was a little robot who" \
      --max-tokens 128 --strategy $s --json > "$OUT/native-$s-$i.json"
  done
  python3 -c "import json,sys; r=[json.load(open(f'$OUT/native-$s-{i}.json')) for i in (1,2,3)]; print('native', '$s', [round(x['timings']['generate']['decodeTokensPerSecond'],1) for x in r], len(r[0]['generatedIds']), 'tok')"
done
