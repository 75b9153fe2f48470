#!/usr/bin/env bash
# The package with subgroups in the browser (dist-b) against the package before (dist-a) on the
# lent GPU through Dawn in Node, next to the native CLI, one lease: the probe's features, greedy
# ids against the exact reference (bench/gemma-dawn.mjs, dist-b), the fused step's profile of
# both builds (two rounds), then bench/dawn-gpu.sh with dist-b (the Node test,
# bench/dawn-bench.mjs, `fuselm generate` natively, 3 runs per strategy).
# Model in two calls (PART=1, PART=2), then this call with .gl, .bench-carry/dawn,
# .bench-carry/dist-a, .bench-carry/dist-b and .bench-carry/bin (fuselm-final.xz).
source bench/gpu-model.sh
source bench/dawn-unpack.sh
exec > >(tee -a "$OUT/log.txt") 2>&1
for d in a b; do
  rm -rf dist && cp -r .bench-carry/dist-$d dist
  echo -n "dist-$d probe: "
  $D/node --input-type=module -e "
    import { loadFuselm } from './bench/dawn-env.mjs';
    const f = await loadFuselm('$D/package', 'dist');
    const r = await f.probe({});
    console.log(JSON.stringify(r.features), JSON.stringify(r.fit));" 2>&1 | grep -v "^Warning\|^ - \|^    at\|^$"
done
FIXTURE=tests/fixtures/exact/smollm2/exact_greedy.jsonl $D/node bench/gemma-dawn.mjs $D/package $M "$OUT/smollm2-dawn-exact.json" 2>&1 | grep -v "^Warning\|^ - \|^    at\|^$"
for round in 1 2; do
  for d in a b; do
    rm -rf dist && cp -r .bench-carry/dist-$d dist
    echo -n "dist-$d "
    PROFILE_ONLY=1 $D/node bench/dawn-bench.mjs $D/package $M /dev/null 2>&1 | grep "^dawn"
  done
done
# The package's bench, the Node test and the native CLI, as bench/dawn-gpu.sh does them (dist-b).
bash bench/dawn-gpu.sh
