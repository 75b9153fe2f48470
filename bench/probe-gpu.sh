#!/usr/bin/env bash
# Runs `fuselm probe --bench --json` on the lent GPU machine and writes a result file
# bench/results-style JSON (device, date, commit, report) to $OUT.
# Carry: .gl (Vulkan loader debs) and target/release/fuselm (built here, x86-64).
set -euo pipefail
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
if ! ./target/release/fuselm probe >/dev/null 2>&1; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
fi
commit=${FUSELM_COMMIT:-unknown}
gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -n1)
for bytes in 268435456 1073741824; do
  ./target/release/fuselm probe --bench --json --runs 9 --bench-bytes $bytes > "$OUT/report-$bytes.json"
done
python3 - "$OUT" "$commit" "$gpu" <<'PY'
import json, sys, datetime, os
out, commit, gpu = sys.argv[1:4]
runs = {}
for name in sorted(os.listdir(out)):
    if name.startswith("report-"):
        runs[name[len("report-"):-len(".json")]] = json.load(open(os.path.join(out, name)))
result = {"kind": "probe-bench", "device": gpu, "date": datetime.date.today().isoformat(),
          "commit": commit, "command": "fuselm probe --bench --json --runs 9 --bench-bytes N",
          "reports_by_bench_bytes": runs}
json.dump(result, open(os.path.join(out, "probe-bench.json"), "w"), indent=1)
for n, r in runs.items():
    b = r["bench"]
    print(n, r["adapter"]["device"], {k: round(b[k]["median"], 2) for k in
          ["dependentDispatch", "submitAndReadback", "readBandwidthOneWorkgroup", "readBandwidthManyWorkgroups"]})
PY
