#!/usr/bin/env bash
# Attention variants side by side on the lent GPU, one lease: like bench/sweep-gpu.sh, but
# fused only and with the ~1k-context workload, printing the profile at both contexts (µs per
# dispatch per role). Each argument is `name` or `name:VAR=value,...`; ROUNDS (default 1).
# Model in two calls (bench/gpu-model.sh): PART=1, then this call with
# .bench-carry/smollm2.part01, .bench-carry/new (fuselm-new.xz) and .gl.
source bench/gpu-model.sh
xz -dc .bench-carry/new/fuselm-new.xz > /root/fuselm; chmod +x /root/fuselm
mkdir -p /root/sweep
for round in $(seq "${ROUNDS:-1}"); do
  for variant in "$@"; do
    name=${variant%%:*}
    vars=()
    [[ $variant == *:* ]] && IFS=, read -ra vars <<< "${variant#*:}"
    json="/root/sweep/$name-$round.json"
    env "${vars[@]}" /root/fuselm bench --model "$M" --profile --strategies fused --runs "${RUNS:-3}" --out "$json" >/dev/null 2>&1 || { echo "$name failed"; continue; }
    python3 - "$json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
tok = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"] if r["strategy"] == "fused"]
out = "%-12s tok/s %s" % (sys.argv[2], tok)
for p in d["profile"]:
    roles = " ".join("%s=%.2f" % (r["role"].split("+")[0][:6], r["microsecondsPerStep"] / r["dispatchesPerStep"]) for r in p["roles"])
    out += " | ctx %d step %.0f: %s" % (p["context"], p["stepMicroseconds"], roles)
print(out)
PY
  done
done
tar -C /root -cJf "$OUT/sweep.tar.xz" sweep
