#!/usr/bin/env bash
# Side by side on the lent GPU: `fuselm bench --profile` of several builds of the CLI (for
# comparing kernel versions in one lease) on SmolLM2-135M-Instruct Q4_1. The model travels in
# two calls while the machine is warm: PART=1 (carry .bench-carry/smollm2.part00), then PART=2
# (carry .bench-carry/smollm2.part01, .bench-carry/bin with fuselm-<name>.xz builds, and .gl).
# Each build is benched as is; builds named in NOSG are benched again with
# FUSELM_NO_SUBGROUPS=1 (the workgroup-memory reductions instead of subgroup ones).
set -euo pipefail
mkdir -p /root/fuselm-model
if [ "${PART:-2}" = 1 ]; then
  cp .bench-carry/smollm2.part00 /root/fuselm-model/
  exit 0
fi
M=/root/fuselm-model/model.gguf
cp .bench-carry/smollm2.part01 /root/fuselm-model/
cat /root/fuselm-model/smollm2.part00 /root/fuselm-model/smollm2.part01 > $M
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  $M" | sha256sum --check
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
f=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f $f ] && export VK_DRIVER_FILES=$f
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p /root/bin
for x in .bench-carry/bin/fuselm-*.xz; do
  n=$(basename "$x" .xz); xz -dc "$x" > /root/bin/$n; chmod +x /root/bin/$n
done
/root/bin/$(ls /root/bin | tail -1) probe --bench --json > "$OUT/probe.json" 2>/dev/null || true
# GPU clocks, power and utilisation while the benches run.
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,pstate,utilization.gpu \
  --format=csv -lms 250 > "$OUT/clocks.csv" 2>/dev/null &
if [ -f .bench-carry/dispatch_cost.xz ]; then
  xz -dc .bench-carry/dispatch_cost.xz > /root/dispatch_cost; chmod +x /root/dispatch_cost
  /root/dispatch_cost | tee "$OUT/dispatch-cost.md"
fi
for b in ${BINS:-$(ls /root/bin)}; do
  echo "== $b"
  /root/bin/$b bench --model $M --profile --runs "${RUNS:-5}" ${BENCH_ARGS:-} --out "$OUT/bench-$b.json" | tail -12
  case " ${NOSG:-} " in *" $b "*)
    echo "== $b, no subgroups"
    FUSELM_NO_SUBGROUPS=1 /root/bin/$b bench --model $M --profile --runs "${RUNS:-5}" ${BENCH_ARGS:-} \
      --out "$OUT/bench-$b-nosg.json" | tail -12 ;;
  esac
done
