#!/usr/bin/env bash
# CPU profiles of fused simulation generations through the npm package on Dawn in Node
# (bench/dawn-sim-cpuprof.mjs), Pendulum with 1,000 members and Acrobot with 10,000, 200 steps,
# next to the native `fuselm sim-bench` for the same configurations. One call: carry .gl,
# .bench-carry/dist-prof (dist/ with the wasm before wasm-opt, names kept), .bench-carry/dawn and
# .bench-carry/bin (fuselm-final.xz).
set -euo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done
ldconfig
f=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f $f ]; then export VK_DRIVER_FILES=$f; fi
D=/root/dawn; mkdir -p $D; xz -dc .bench-carry/dawn/node.xz > $D/node; chmod +x $D/node
tar xJf .bench-carry/dawn/dawn-linux-x64.tar.xz -C $D
xz -dc .bench-carry/bin/fuselm-final.xz > $D/fuselm; chmod +x $D/fuselm
for cfg in pendulum:1000 acrobot:10000; do
  env=${cfg%%:*}; pop=${cfg##*:}
  ENV=$env POPULATION=$pop EPISODE=200 $D/node bench/dawn-sim-cpuprof.mjs $D/package .bench-carry/dist-prof /tmp/sim-$env.cpuprofile
  $D/node bench/dawn-cpuprof.mjs --summarise /tmp/sim-$env.cpuprofile "$OUT/sim-$env-$pop-cpuprof-summary.json" | head -30
  xz -c /tmp/sim-$env.cpuprofile > "$OUT/sim-$env-$pop.cpuprofile.xz"
done
$D/fuselm sim-bench --runs 9 --populations 1000,10000 --episodes 200 --out "$OUT/sim-native.json" > /dev/null
python3 -c "import json; print(json.load(open('$OUT/sim-native.json'))['report']['markdown'])" 2>/dev/null || python3 -c "import json; d=json.load(open('$OUT/sim-native.json')); print(d.get('markdown') or list(d))"

