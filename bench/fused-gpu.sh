#!/usr/bin/env bash
# `fuselm bench` (every strategy side by side, the toy grid, the per-role profile) for
# SmolLM2-135M-Instruct Q4_1 on the lent GPU. The model (98 MB) is larger than one device call
# may carry, so it travels in two parts: call once with PART=1 (carry .bench-carry/smollm2.part00)
# and once with PART=2 (carry .bench-carry/smollm2.part01, .gl and target/release/fuselm) while
# the machine is still warm; the second call assembles the file and runs the bench.
set -euo pipefail
mkdir -p /root/fuselm-model
if [ "${PART:-2}" = 1 ]; then
  cp .bench-carry/smollm2.part00 /root/fuselm-model/
  exit 0
fi
cp .bench-carry/smollm2.part01 /root/fuselm-model/
cat /root/fuselm-model/smollm2.part00 /root/fuselm-model/smollm2.part01 > /root/fuselm-model/model.gguf
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  /root/fuselm-model/model.gguf" | sha256sum --check
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
FUSELM=${FUSELM:-./target/release/fuselm}
$FUSELM probe >/dev/null 2>&1 || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$FUSELM bench --model /root/fuselm-model/model.gguf --toy --profile \
  --runs "${RUNS:-5}" --out "$OUT/bench-native.json"
