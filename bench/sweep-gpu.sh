#!/usr/bin/env bash
# Variants of the fused kernels side by side on the lent GPU, one lease: each argument is
# `name` or `name:VAR=value,VAR=value` (the measurement knobs the fuselm CLI reads: FUSELM_LANES,
# FUSELM_HEAD_LANES, FUSELM_NO_SUBGROUPS, FUSELM_SHADER_CHECKS=default, FUSELM_FFN_PASSES, …; see
# bench/NOTES.md and `fuselm bench --help`), each a `fuselm bench --profile --no-long` of SmolLM2; one line per variant
# (fused only: tok/s per workload, step µs, µs per dispatch per role); the JSON files come back as
# $OUT/sweep.tar.xz. Rounds
# (ROUNDS, default 2) repeat the whole list so drift shows. LONG=1: fused only, with the
# ~1k-context workload, and the profile at both contexts (bench/profile-line.py). Model in two calls
# (bench/gpu-model.sh): PART=1, then this call with .bench-carry/smollm2.part01,
# .bench-carry/new (fuselm-new.xz) and .gl.
#   bench/sweep-gpu.sh default lanes32:FUSELM_LANES=32 nosg:FUSELM_NO_SUBGROUPS=1
source bench/gpu-model.sh
xz -dc .bench-carry/new/fuselm-new.xz > /root/fuselm; chmod +x /root/fuselm
mkdir -p /root/sweep
for round in $(seq "${ROUNDS:-2}"); do
  for variant in "$@"; do
    name=${variant%%:*}
    vars=()
    [[ $variant == *:* ]] && IFS=, read -ra vars <<< "${variant#*:}"
    json="/root/sweep/$name-$round.json"
    if [ "${LONG:-}" = 1 ]; then
      env "${vars[@]}" /root/fuselm bench --model "$M" --profile --strategies fused --runs "${RUNS:-3}" --out "$json" >/dev/null 2>&1 || { echo "$name failed"; continue; }
      python3 bench/profile-line.py "$json" "$name"
      continue
    fi
    env "${vars[@]}" /root/fuselm bench --model "$M" --profile --no-long --strategies fused --runs "${RUNS:-3}" --out "$json" >/dev/null 2>&1
    python3 - "$json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
tok = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"] if r["strategy"] == "fused"]
p = d["profile"][0]
roles = " ".join("%s=%.2f" % (r["role"].split("+")[0], r["microsecondsPerStep"] / r["dispatchesPerStep"]) for r in p["roles"])
print("%-14s fused tok/s %s  step %.0f us  %s" % (sys.argv[2], tok, p["stepMicroseconds"], roles))
PY
  done
done
tar -C /root -cJf "$OUT/sweep.tar.xz" sweep
