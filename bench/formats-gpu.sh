#!/usr/bin/env bash
# Weight formats side by side on the lent GPU, one lease: for each format, `fuselm
# synthetic-model` writes a random Llama of Llama-3.2-1B's width (n_embd 2048, n_ff 8192, 32
# heads, 8 KV heads; LAYERS layers, default 8; the synthetic vocabulary is tiny) with every
# matrix in that format, then `fuselm bench --profile --no-long` prints fused decode tok/s and
# the per-role µs and GB/s (each dispatch timed alone). Needs no downloaded model: carry .gl and
# .bench-carry/new (fuselm-new.xz). JSON files come back as $OUT/formats.tar.xz.
#   bench/formats-gpu.sh Q4_1 Q8_0 Q4_K Q6_K BF16 F16
set -euo pipefail
source bench/gpu-vulkan.sh
xz -dc .bench-carry/new/fuselm-new.xz > /root/fuselm; chmod +x /root/fuselm
mkdir -p /root/formats
for t in "$@"; do
  m=/root/formats/$t.gguf
  /root/fuselm synthetic-model $m --matrix-type $t --n-embd 2048 --n-ff 8192 --layers "${LAYERS:-8}" \
    --heads 32 --kv-heads 8 >/dev/null
  /root/fuselm bench --model $m --profile --no-long --runs "${RUNS:-3}" --out /root/formats/$t.json >/dev/null 2>&1
  python3 - /root/formats/$t.json "$t" "$(stat -c %s $m)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
tok = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"] if r["strategy"] == "fused"]
unf = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"] if r["strategy"] == "unfused"]
p = d["profile"][0]
roles = "  ".join("%s %.1fus %.0fGB/s" % (r["role"].split("+")[0], r["microsecondsPerStep"] / r["dispatchesPerStep"], r["gigabytesPerSecond"]) for r in p["roles"][:4])
print("%-5s %4.0f MB  fused tok/s %s (unfused %s)  step %.0f us  %s" % (sys.argv[2], int(sys.argv[3]) / 1e6, tok, unf, p["stepMicroseconds"], roles))
PY
  rm -f $m
done
rm -f /root/formats/*.gguf
tar -C /root -cJf "$OUT/formats.tar.xz" formats
