#!/usr/bin/env bash
# Gemma 3 270M Q4_K_M on the lent GPU, one lease: `fuselm bench --profile` (native, both
# strategies, per-role profile of the fused step), both strategies' GPU path against the exact
# reference on all ten prompts (tests/gemma3_reference.rs with FUSELM_EXACT_ALL=1).
# Build here: target/release/fuselm and `cargo test --release --no-run --test gemma3_reference`,
# xz-compressed into .bench-carry/gemma-bin as fuselm.xz and gemma3_reference.xz.
# The model travels in five calls (bench/gemma-model.sh: PART=0..3, then this script with
# .bench-carry/gemma/gemma.part04, .bench-carry/gemma-bin and .gl).
source bench/gemma-model.sh
source bench/gpu-vulkan.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /root/bin
for x in .bench-carry/gemma-bin/*.xz; do n=$(basename "$x" .xz); xz -dc "$x" > /root/bin/$n; chmod +x /root/bin/$n; done
/root/bin/fuselm bench --model $M --profile --runs "${RUNS:-5}" --out "$OUT/bench-gemma-native.json" | head -60
mkdir -p models && ln -sf $M models/gemma-3-270m-q4_k_m.gguf
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
FUSELM_EXACT_ALL=1 /root/bin/gemma3_reference --nocapture gemma3_on_the_gpu > "$OUT/gemma-exact-gpu.log" 2>&1 \
  && echo "exact reference (GPU, all prompts): passed" || { echo "exact reference: FAILED"; tail -30 "$OUT/gemma-exact-gpu.log"; }
grep -E "greedy|test result" "$OUT/gemma-exact-gpu.log" | tail -12
