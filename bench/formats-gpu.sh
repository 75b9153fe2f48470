#!/usr/bin/env bash
# Weight formats side by side on the lent GPU, one lease: for each format, `fuselm
# synthetic-model` writes a random Llama of Llama-3.2-1B's width (n_embd 2048, n_ff 8192, 32
# heads, 8 KV heads; LAYERS layers, default 8; the synthetic vocabulary is tiny) with every
# matrix in that format, then `fuselm bench --profile --no-long` prints fused decode tok/s and
# the per-role µs and GB/s (each dispatch timed alone). Needs no downloaded model: carry .gl and
# .bench-carry/new (fuselm-new.xz). JSON files come back as $OUT/formats.tar.xz.
# VARIANTS (optional): space-separated `name` or `name:VAR=value,VAR=value` (the native knobs of
# bench/NOTES.md); each format's model is then benched once per variant, fused only, ROUNDS
# (default 1) times over the list so drift shows. BUILDS (optional, e.g. "old new"): binaries
# .bench-carry/B/fuselm-B.xz benched alternately (the last one writes the models). SHAPE
# (optional) replaces the width flags, e.g. "--n-embd 896 --n-ff 4864 --heads 14 --kv-heads 2".
#   bench/formats-gpu.sh Q4_1 Q8_0 Q4_K Q6_K BF16 F16
#   VARIANTS="base rpl2:FUSELM_DOWN_RPL=2" ROUNDS=2 bench/formats-gpu.sh Q4_K BF16
set -euo pipefail
source bench/gpu-vulkan.sh
builds=${BUILDS:-new}
for b in $builds; do
  xz -dc .bench-carry/$b/fuselm-$b.xz > /root/fuselm-$b; chmod +x /root/fuselm-$b
done
ln -sf /root/fuselm-${builds##* } /root/fuselm
mkdir -p /root/formats
for t in "$@"; do
  m=/root/formats/$t.gguf
  /root/fuselm synthetic-model $m --matrix-type $t --layers "${LAYERS:-8}" \
    ${SHAPE:---n-embd 2048 --n-ff 8192 --heads 32 --kv-heads 8} >/dev/null
  for round in $(seq "${ROUNDS:-1}"); do
    for b in $builds; do
    for variant in ${VARIANTS:-all}; do
      name=${variant%%:*}
      vars=()
      [[ $variant == *:* ]] && IFS=, read -ra vars <<< "${variant#*:}"
      only=()
      [ -n "${VARIANTS:-}" ] && only=(--strategies fused)
      [ -n "${BUILDS:-}" ] && name=$b-$name
      json=/root/formats/$t-$name-$round.json
      env "${vars[@]}" /root/fuselm-$b bench --model $m --profile --no-long --runs "${RUNS:-3}" "${only[@]}" \
        --out "$json" >/dev/null 2>&1 || { echo "$t $name failed"; continue; }
      python3 - "$json" "$t $name" "$(stat -c %s $m)" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))["report"]
tok = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"] if r["strategy"] == "fused"]
unf = [round(r["decodeTokensPerSecond"]["median"]) for r in d["results"] if r["strategy"] == "unfused"]
p = d["profile"][0]
roles = "  ".join("%s %.1fus %.0fGB/s" % (r["role"].split("+")[0], r["microsecondsPerStep"] / r["dispatchesPerStep"], r["gigabytesPerSecond"]) for r in p["roles"][:4])
print("%-12s %4.0f MB  fused tok/s %s (unfused %s)  step %.0f us  %s" % (sys.argv[2], int(sys.argv[3]) / 1e6, tok, unf, p["stepMicroseconds"], roles))
PY
    done
    done
  done
  rm -f $m
done
rm -f /root/formats/*.gguf
tar -C /root -cJf "$OUT/formats.tar.xz" formats
