#!/usr/bin/env bash
# CPU profiles of fused simulation generations through the npm package on Dawn in Node
# (bench/dawn-sim-cpuprof.mjs), Pendulum with 1,000 members and Acrobot with 10,000, 200 steps,
# next to the native `fuselm sim-bench` for the same configurations. One call: carry .gl,
# .bench-carry/dist-prof (dist/ with the wasm before wasm-opt, names kept), .bench-carry/dawn and
# .bench-carry/bin (fuselm-final.xz).
set -euo pipefail
source bench/gpu-vulkan.sh
source bench/dawn-unpack.sh
xz -dc .bench-carry/bin/fuselm-final.xz > $D/fuselm; chmod +x $D/fuselm
for cfg in pendulum:1000 acrobot:10000; do
  env=${cfg%%:*}; pop=${cfg##*:}
  ENV=$env POPULATION=$pop EPISODE=200 $D/node bench/dawn-sim-cpuprof.mjs $D/package .bench-carry/dist-prof /tmp/sim-$env.cpuprofile
  $D/node bench/dawn-cpuprof.mjs --summarise /tmp/sim-$env.cpuprofile "$OUT/sim-$env-$pop-cpuprof-summary.json" | head -30
  xz -c /tmp/sim-$env.cpuprofile > "$OUT/sim-$env-$pop.cpuprofile.xz"
done
$D/fuselm sim-bench --runs 9 --populations 1000,10000 --episodes 200 --out "$OUT/sim-native.json" > /dev/null
python3 -c "import json; print(json.load(open('$OUT/sim-native.json'))['report']['markdown'])" 2>/dev/null || python3 -c "import json; d=json.load(open('$OUT/sim-native.json')); print(d.get('markdown') or list(d))"

