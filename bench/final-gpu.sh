#!/usr/bin/env bash
# Issue 7's native results on the lent GPU, one lease: `fuselm bench --toy --profile` (every
# strategy side by side, SmolLM2 workloads + the toy grid, per-role profile) and the
# exact-reference test for every strategy on all ten prompts (tests/generate_smollm2.rs with
# FUSELM_EXACT_ALL=1). Build here: target/release/fuselm and the test binary
# (`cargo test --release --no-run --test generate_smollm2`), xz-compressed into .bench-carry/bin
# as fuselm-final.xz and generate_smollm2.xz (optionally fuselm-prev.xz, profiled first for a
# same-lease comparison). Model in two calls (bench/gpu-model.sh): PART=1, then this call with
# .bench-carry/smollm2.part01, .bench-carry/bin and .gl.
source bench/gpu-model.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /root/bin
for x in .bench-carry/bin/*.xz; do n=$(basename "$x" .xz); xz -dc "$x" > /root/bin/$n; chmod +x /root/bin/$n; done
if [ -x /root/bin/fuselm-prev ]; then
  /root/bin/fuselm-prev bench --model $M --profile --runs 3 --no-long --out "$OUT/prev.json" | head -6
fi
/root/bin/fuselm-final bench --model $M --toy --profile --runs "${RUNS:-5}" --out "$OUT/bench-native.json"
mkdir -p models && ln -sf $M models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
FUSELM_EXACT_ALL=1 /root/bin/generate_smollm2 --nocapture > "$OUT/exact-gpu.log" 2>&1 && echo "exact reference: passed" \
  || { echo "exact reference: FAILED"; tail -30 "$OUT/exact-gpu.log"; }
grep -E "^test |greedy|teacher|agree|max" "$OUT/exact-gpu.log" | tail -25
