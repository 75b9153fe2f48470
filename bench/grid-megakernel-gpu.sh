#!/usr/bin/env bash
# Issue 9's grid megakernel (strategy megakernel-grid) on the lent GPU, one lease: the
# occupancy discovery; SmolLM2-135M Q4_1 greedy generations through the CLI at several grid
# workgroup counts next to fused and the one-workgroup megakernel (same prompt, same lease);
# `fuselm bench --grid` on SmolLM2 and the toy grid (every strategy side by side); the
# exact-reference test for every strategy (FUSELM_EXACT_ALL=1). Build here: target/release/fuselm
# and the test binary (`cargo test --release --no-run --test generate_smollm2`) xz-compressed into
# .bench-carry/bin as fuselm-final.xz and generate_smollm2.xz. Model in two calls
# (bench/gpu-model.sh): PART=1, then this call with .bench-carry/smollm2.part01, .bench-carry/bin, .gl.
source bench/gpu-model.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /root/bin
for x in .bench-carry/bin/*.xz; do n=$(basename "$x" .xz); xz -dc "$x" > /root/bin/$n; chmod +x /root/bin/$n; done
F=/root/bin/fuselm-final
G=/root/gen; mkdir -p $G
P="Once upon a time, there was a little robot who"
gen() { # strategy, grid workgroups (or "" for the default), output name
  local extra=(); [ -n "$2" ] && extra=(--grid-workgroups "$2")
  $F generate --model $M --prompt "$P" --max-tokens 128 --strategy "$1" "${extra[@]}" --json \
    > "$G/gen-$3.json" 2>> "$OUT/gen-stderr.txt" || { echo "$3 failed"; rm -f "$G/gen-$3.json"; } >> "$OUT/gen-stderr.txt"
}
for rep in 1 2; do
  gen fused "" "fused-$rep"
  gen megakernel-grid "" "grid-auto-$rep"
  for g in 16 33 66 132 264 528; do gen megakernel-grid $g "grid-$g-$rep"; done
done
gen megakernel "" "mega-1"
python3 - "$G" <<'PY' | tee "$OUT/grid-sweep.md"
import json, sys, glob, os
out = sys.argv[1]
ref = json.load(open(f"{out}/gen-fused-1.json"))["generatedIds"]
rows = []
for f in sorted(glob.glob(f"{out}/gen-*.json")):
    r = json.load(open(f)); t = r["timings"]["generate"]
    rows.append((os.path.basename(f)[4:-5], r.get("gridWorkgroups"), round(t["decodeTokensPerSecond"]), round(t["promptTokensPerSecond"]), r["generatedIds"] == ref))
print("| run | grid workgroups | decode tok/s | prompt tok/s | same ids as fused |")
print("|---|---|---|---|---|")
for r in rows: print("| " + " | ".join(str(x) for x in r) + " |")
PY
tar -C /root -cJf "$OUT/gen.tar.xz" gen
$F bench --model $M --grid --no-long --runs "${RUNS:-5}" --out "$OUT/bench-smollm2-grid.json" 2>&1 | tail -12
$F bench --toy --grid --runs "${RUNS:-5}" --out "$OUT/bench-toy-grid.json" 2>&1 | tail -40
mkdir -p models && ln -sf $M models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
FUSELM_EXACT_ALL=1 /root/bin/generate_smollm2 --nocapture > "$OUT/exact-gpu.log" 2>&1 && echo "exact reference: passed" \
  || { echo "exact reference: FAILED"; tail -30 "$OUT/exact-gpu.log"; }
grep -E "^test |greedy|teacher|agree|max" "$OUT/exact-gpu.log" | tail -25
