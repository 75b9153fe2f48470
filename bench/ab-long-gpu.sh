#!/usr/bin/env bash
# Two builds of fuselm side by side on the lent GPU, one lease, SmolLM2, fused only, with the
# ~1k-context workload (bench/ab-gpu.sh skips it): each argument is `name:binary.xz`; ROUNDS
# (default 3) alternate the builds. One line per run: fused decode tok/s (prompt 16, prompt
# 128, ~1k context), step µs and µs per dispatch per role at both profiled contexts; the JSON
# files come back under $OUT/ab/. Model in two calls (bench/gpu-model.sh): PART=1, then this
# call with .bench-carry/smollm2.part01, the binaries and .gl.
#   bench/ab-long-gpu.sh old:.bench-carry/old/fuselm-old.xz new:.bench-carry/new/fuselm-new.xz
source bench/gpu-model.sh
mkdir -p /root/ab "$OUT/ab"
for arg in "$@"; do
  xz -dc "${arg#*:}" > "/root/ab/${arg%%:*}"
  chmod +x "/root/ab/${arg%%:*}"
done
for round in $(seq "${ROUNDS:-3}"); do
  for arg in "$@"; do
    name=${arg%%:*}
    json="$OUT/ab/$name-$round.json"
    "/root/ab/$name" bench --model "$M" --profile --strategies fused --runs "${RUNS:-5}" --out "$json" >/dev/null 2>&1
    python3 - "$json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
tok = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"] if r["strategy"] == "fused"]
out = "%-6s tok/s %s" % (sys.argv[2], tok)
for p in d["profile"]:
    roles = " ".join("%s=%.2f" % (r["role"].split("+")[0][:6], r["microsecondsPerStep"] / r["dispatchesPerStep"]) for r in p["roles"])
    out += " | ctx %d step %.0f: %s" % (p["context"], p["stepMicroseconds"], roles)
print(out)
PY
  done
done
