#!/usr/bin/env bash
# Lanes-per-row sweep of the fused kernels on the lent GPU (FUSELM_LANES, FUSELM_HEAD_LANES,
# FUSELM_NO_SUBGROUPS), each a `fuselm bench --profile` of SmolLM2 in the same lease: the data
# behind `kernels::fused_layer::lanes_for`. Model in two calls (bench/gpu-model.sh): PART=1, then
# this call with .bench-carry/smollm2.part01, .bench-carry/bin (fuselm-new.xz) and .gl.
source bench/gpu-model.sh
xz -dc .bench-carry/bin/fuselm-new.xz > /root/fuselm; chmod +x /root/fuselm
sweep() { # name, env...
  local name=$1; shift
  env "$@" /root/fuselm bench --model $M --profile --runs "${RUNS:-3}" --out "$OUT/lanes-$name.json" >/dev/null 2>&1
  python3 - "$OUT/lanes-$name.json" "$name" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
tok = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"] if r["strategy"] == "fused"]
p = d["profile"][0]
roles = " ".join("%s=%.2f" % (r["role"].split("+")[0], r["microsecondsPerStep"] / r["dispatchesPerStep"]) for r in p["roles"])
print("%-12s fused tok/s %s  step %.0f us  %s" % (sys.argv[2], tok, p["stepMicroseconds"], roles))
PY
}
sweep default
sweep l32 FUSELM_LANES=32
sweep l128 FUSELM_LANES=128
sweep l256 FUSELM_LANES=256
sweep head64 FUSELM_HEAD_LANES=64
sweep head128 FUSELM_HEAD_LANES=128
sweep nosg FUSELM_NO_SUBGROUPS=1
