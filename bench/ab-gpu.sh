#!/usr/bin/env bash
# Two or more builds of fuselm side by side on the lent GPU, one lease, SmolLM2: each argument
# is `name:binary` (an xz-compressed `fuselm` carried under .bench-carry/), each a
# `fuselm bench --profile --no-long` of SmolLM2; ROUNDS (default 2) alternate the builds so
# drift shows. One line per run (tok/s per strategy and workload, fused step µs); the JSON files
# come back under $OUT/ab/. Model in two calls (bench/gpu-model.sh): PART=1, then this call with
# .bench-carry/smollm2.part01, the binaries and .gl. LONG=1: fused only, with the ~1k-context
# workload, and the profile at both contexts (bench/profile-line.py). An argument
# `name:binary:VAR=value,VAR=value` runs its binary with those native knobs (bench/NOTES.md).
#   bench/ab-gpu.sh before:.bench-carry/gemma-bin/fuselm-before.xz after:.bench-carry/gemma-bin/fuselm.xz
#   bench/ab-gpu.sh old:.bench-carry/old/fuselm-old.xz new:.bench-carry/new/fuselm-new.xz \
#     new-hg1:.bench-carry/new/fuselm-new.xz:FUSELM_ATT_HG=1
source bench/gpu-model.sh
mkdir -p /root/ab "$OUT/ab"
for arg in "$@"; do
  IFS=: read -r name bin _ <<< "$arg"
  xz -dc "$bin" > "/root/ab/$name"
  chmod +x "/root/ab/$name"
done
for round in $(seq "${ROUNDS:-2}"); do
  for arg in "$@"; do
    IFS=: read -r name _ knobs <<< "$arg"
    vars=()
    [ -n "$knobs" ] && IFS=, read -ra vars <<< "$knobs"
    json="$OUT/ab/$name-$round.json"
    if [ "${LONG:-}" = 1 ]; then
      env "${vars[@]}" "/root/ab/$name" bench --model "$M" --profile --strategies fused --runs "${RUNS:-5}" --out "$json" >/dev/null 2>&1
      python3 bench/profile-line.py "$json" "$name"
      continue
    fi
    env "${vars[@]}" "/root/ab/$name" bench --model "$M" --profile --no-long --runs "${RUNS:-5}" --out "$json" >/dev/null 2>&1
    python3 - "$json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
tok = ["%s/%s=%d" % (r["strategy"], r["workload"], round(r["decodeTokensPerSecond"]["median"])) for r in d["results"]]
p = d["profile"][0]
print("%-8s %s  fused step %.0f us" % (sys.argv[2], " ".join(tok), p["stepMicroseconds"]))
PY
  done
done
