#!/usr/bin/env bash
# The final build's native figures on the lent GPU, one lease, without the slow megakernel
# bench on SmolLM2: `fuselm bench --strategies unfused,fused --profile` (decode, prefill, long
# context, per-role profile) and the exact-reference test of every strategy on all ten prompts
# (tests/generate_smollm2.rs, FUSELM_EXACT_ALL=1). Build here as for bench/final-gpu.sh
# (fuselm-final.xz, generate_smollm2.xz in .bench-carry/bin). Model in two calls (PART=1, PART=2),
# then this call with .bench-carry/bin and .gl.
source bench/gpu-model.sh
exec > >(tee -a "$OUT/log.txt") 2>&1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
mkdir -p /root/bin
for x in .bench-carry/bin/*.xz; do n=$(basename "$x" .xz); xz -dc "$x" > /root/bin/$n; chmod +x /root/bin/$n; done
/root/bin/fuselm-final bench --model $M --strategies unfused,fused --profile --runs "${RUNS:-5}" --out "$OUT/bench-native.json" | head -20
mkdir -p models && ln -sf $M models/SmolLM2-135M-Instruct.Q4_1.gguf
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
FUSELM_EXACT_ALL=1 /root/bin/generate_smollm2 --nocapture > "$OUT/exact-gpu.log" 2>&1 && echo "exact reference: passed" \
  || { echo "exact reference: FAILED"; tail -30 "$OUT/exact-gpu.log"; }
grep -E "^test |greedy|teacher|agree|max" "$OUT/exact-gpu.log" | tail -25
