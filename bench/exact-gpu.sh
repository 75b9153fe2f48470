#!/usr/bin/env bash
# The exact-reference test (tests/generate_smollm2.rs) with FUSELM_EXACT_ALL=1 — every strategy,
# all ten prompts, 64 tokens — on the lent GPU, where it takes seconds instead of CI's minutes.
# Build here: `cargo test --release --no-run --test generate_smollm2`, copy the binary to
# .bench-carry/bin/generate_smollm2. Carry it with .gl and the model parts as in
# bench/fused-gpu.sh (PART=1 first). The binary looks for the repo at the path it was built in
# (/work/main), so that path is linked to this checkout.
set -euo pipefail
mkdir -p /root/fuselm-model
if [ "${PART:-2}" = 1 ]; then
  cp .bench-carry/smollm2.part00 /root/fuselm-model/
  exit 0
fi
cp .bench-carry/smollm2.part01 /root/fuselm-model/
mkdir -p models
cat /root/fuselm-model/smollm2.part00 /root/fuselm-model/smollm2.part01 > models/SmolLM2-135M-Instruct.Q4_1.gguf
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
[ -e /work/main ] || { mkdir -p /work && ln -s "$PWD" /work/main; }
f=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $f ] && export VK_DRIVER_FILES=$f
FUSELM_EXACT_ALL=1 .bench-carry/bin/generate_smollm2 --nocapture 2>&1 | tee "$OUT/exact-gpu.log"
