#!/usr/bin/env bash
# Is decode through the npm package on Dawn bound by the host's command recording? On the lent
# GPU: Dawn's own cost per WebGPU call (bench/dawn-calls.mjs, plain JS), then the package's fused
# and unfused decode with the host time spent recording per token (`timings.recordSeconds`), and
# the native CLI's, same lease. Calls as in bench/dawn-gpu.sh: PART=1 (carry
# .bench-carry/smollm2.part00), PART=2 (.bench-carry/smollm2.part01), then PART=3 (carry .gl, dist,
# .bench-carry/bin with fuselm-final.xz, .bench-carry/dawn).
set -euo pipefail
source bench/gpu-model.sh
source bench/dawn-unpack.sh
xz -dc .bench-carry/bin/fuselm-final.xz > $D/fuselm; chmod +x $D/fuselm
$D/node bench/dawn-calls.mjs $D/package "$OUT/dawn-calls.json"
RUNS=${RUNS:-3} SKIP_CHAT=1 $D/node bench/dawn-bench.mjs $D/package $M "$OUT/bench-dawn.json"
for i in 1 2 3; do
  $D/fuselm generate --model $M --prompt "Once upon a time, there was a little robot who" \
    --max-tokens 128 --strategy fused --json > "$OUT/native-fused-$i.json"
done
python3 - "$OUT" <<'PY'
import json, sys
for i in (1, 2, 3):
    t = json.load(open(f"{sys.argv[1]}/native-fused-{i}.json"))["timings"]["generate"]
    n = 127
    print(f"native fused {t['decodeTokensPerSecond']:.1f} tok/s, host record {t['recordSeconds'] * 1e6 / n:.0f} µs/token")
PY
