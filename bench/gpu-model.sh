# Sourced by the bench/*-gpu.sh scripts at the start of a run on the lent GPU. The model (98 MB)
# is larger than one device call may carry, so it travels in two calls while the machine is warm:
# PART=1 carries .bench-carry/smollm2.part00 (made here with
# `split -b 49181216 -d -a 2 models/SmolLM2-135M-Instruct.Q4_1.gguf .bench-carry/smollm2.part`)
# and stops; the next call carries .bench-carry/smollm2.part01 (or nothing, when the model is
# already assembled from an earlier call of the same lease) plus .gl (the Vulkan loader debs:
# see the device tool's README). Scripts whose last call carries too much besides (Dawn) take
# PART=2: it carries only part01 and stops, and the last call carries neither part.
# After sourcing: $M is the checked model, Vulkan finds the GPU.
set -euo pipefail
mkdir -p /root/fuselm-model
if [ "${PART:-}" = 1 ] || [ "${PART:-}" = 2 ]; then
  cp .bench-carry/smollm2.part0$((PART - 1)) /root/fuselm-model/
  exit 0
fi
M=/root/fuselm-model/model.gguf
if [ -f .bench-carry/smollm2.part01 ]; then cp .bench-carry/smollm2.part01 /root/fuselm-model/; fi
if [ ! -f $M ]; then
  cat /root/fuselm-model/smollm2.part00 /root/fuselm-model/smollm2.part01 > $M.part && mv $M.part $M
fi
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $M" | sha256sum --check
source bench/gpu-vulkan.sh
