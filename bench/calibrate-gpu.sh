#!/usr/bin/env bash
# `fuselm generate --calibrate` on SmolLM2-135M-Instruct Q4_1 on the lent GPU: which strategy the
# calibration picks on a real model (the megakernel is not timed there: 98 MB of weights per token),
# three times, next to the planner's own pick. Model in two calls (bench/gpu-model.sh): PART=1, then
# this call with .bench-carry/smollm2.part01, .gl and .bench-carry/bin (fuselm-final.xz).
# Writes $OUT/calibrate-smollm2.txt (stderr of each run) and $OUT/calibrate-smollm2-N.json.
set -euo pipefail
source bench/gpu-model.sh
D=/root/fuselm-bin; mkdir -p $D
xz -dc .bench-carry/bin/fuselm-final.xz > $D/fuselm; chmod +x $D/fuselm
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="Once upon a time, there was a little robot who"
$D/fuselm generate --model $M --prompt "$P" --max-tokens 128 --json 2>> "$OUT/calibrate-smollm2.txt" > "$OUT/planned.json"
for i in 1 2 3; do
  $D/fuselm generate --model $M --prompt "$P" --max-tokens 128 --calibrate --json \
    2>> "$OUT/calibrate-smollm2.txt" > "$OUT/calibrate-smollm2-$i.json"
done
grep -o '\[strategy [^]]*\]' "$OUT/calibrate-smollm2.txt"
python3 - "$OUT" <<'PY'
import json, sys
out = sys.argv[1]
runs = [json.load(open(f"{out}/calibrate-smollm2-{i}.json")) for i in (1, 2, 3)]
planned = json.load(open(f"{out}/planned.json"))
print("same ids as the planner's run:", all(r["generatedIds"] == planned["generatedIds"] for r in runs))
PY
grep -o '"skipped":\[[^]]*\]' "$OUT/calibrate-smollm2.txt" | head -1
