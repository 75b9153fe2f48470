#!/usr/bin/env bash
# Chained phases vs dependent dispatches (`--example chained_phases`) on the lent GPU; markdown
# under $OUT. Carry .gl and .bench-carry/x/chained_phases.xz (built here with
# `cargo build --release --locked --example chained_phases`).
set -euo pipefail
source bench/gpu-vulkan.sh
mkdir -p /root/bin
xz -dc .bench-carry/x/chained_phases.xz > /root/bin/chained_phases
chmod +x /root/bin/chained_phases
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
/root/bin/chained_phases | tee "$OUT/chained-phases.md"
