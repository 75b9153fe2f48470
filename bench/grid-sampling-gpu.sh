#!/usr/bin/env bash
# Seeded sampling on SmolLM2-135M Q4_1 on the lent GPU: fused, unfused, megakernel-grid (the
# discovery's workgroup count and 132) with the same settings must give the same ids (in grid
# mode workgroup 0 samples while the others wait at a grid barrier). Model in two calls
# (bench/gpu-model.sh): PART=1, then this call with .bench-carry/smollm2.part01,
# .bench-carry/bin (fuselm-final.xz) and .gl. Writes $OUT/grid-sampling.md.
set -euo pipefail
source bench/gpu-model.sh
D=/root/fuselm-bin; mkdir -p $D
xz -dc .bench-carry/bin/fuselm-final.xz > $D/fuselm; chmod +x $D/fuselm
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
P="Once upon a time, there was a little robot who"
S=(--temperature 0.8 --top-k 40 --top-p 0.95 --min-p 0.02 --repetition-penalty 1.1 --frequency-penalty 0.05 --presence-penalty 0.1 --penalty-last-n 64)
mkdir -p /root/s
for seed in 1 2 3; do
  for st in fused unfused megakernel-grid; do
    $D/fuselm generate --model $M --prompt "$P" --max-tokens 96 --strategy $st --seed $seed "${S[@]}" --json > /root/s/$st-$seed.json 2>/dev/null
  done
  $D/fuselm generate --model $M --prompt "$P" --max-tokens 96 --strategy megakernel-grid --grid-workgroups 132 --seed $seed "${S[@]}" --json > /root/s/grid132-$seed.json 2>/dev/null
done
python3 - <<'PY' | tee "$OUT/grid-sampling.md"
import json
print("| seed | strategy | grid workgroups | tokens | decode tok/s | same ids as fused |")
print("|---|---|---|---|---|---|")
for seed in (1, 2, 3):
    ref = json.load(open(f"/root/s/fused-{seed}.json"))["generatedIds"]
    for st in ("fused", "unfused", "megakernel-grid", "grid132"):
        r = json.load(open(f"/root/s/{st}-{seed}.json"))
        t = r["timings"]["generate"]
        print(f"| {seed} | {r['strategy']} | {r.get('gridWorkgroups')} | {len(r['generatedIds'])} | {t['decodeTokensPerSecond']:.0f} | {r['generatedIds'] == ref} |")
PY
