# One line from a `fuselm bench --profile` JSON (argv[1]) named argv[2]: fused decode tok/s per
# workload, then at each profiled context the step µs and µs per dispatch of each role. Used by
# bench/sweep-gpu.sh and bench/ab-gpu.sh with LONG=1.
import json, sys
d = json.load(open(sys.argv[1]))["report"]
tok = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"] if r["strategy"] == "fused"]
out = "%-12s tok/s %s" % (sys.argv[2], tok)
for p in d["profile"]:
    roles = " ".join("%s=%.2f" % (r["role"].split("+")[0][:6], r["microsecondsPerStep"] / r["dispatchesPerStep"]) for r in p["roles"])
    out += " | ctx %d step %.0f: %s" % (p["context"], p["stepMicroseconds"], roles)
print(out)
