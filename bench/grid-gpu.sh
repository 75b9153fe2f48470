#!/usr/bin/env bash
# Issue 9, step 0 on the lent GPU: the grid-barrier cost and message-passing litmus
# (`--example grid_barrier`) next to the dependent-dispatch cost (`--example dispatch_cost`),
# same lease; markdown under $OUT. Needs no model, so it can share the PART=1 call:
#   for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig; bench/grid-gpu.sh
# with .bench-carry/new (grid_barrier.xz, dispatch_cost.xz, built here with
# `cargo build --release --example grid_barrier --example dispatch_cost`) and .gl carried.
set -euo pipefail
f=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -f $f ]; then export VK_DRIVER_FILES=$f; fi
mkdir -p /root/bin
for x in grid_barrier dispatch_cost; do xz -dc .bench-carry/new/$x.xz > /root/bin/$x; chmod +x /root/bin/$x; done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
/root/bin/grid_barrier | tee "$OUT/grid-barrier.md"
/root/bin/dispatch_cost | tee "$OUT/dispatch-cost.md"
