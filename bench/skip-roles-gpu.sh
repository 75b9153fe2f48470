#!/usr/bin/env bash
# How much of the fused step each layer role costs in the pass, by leaving it out: a temporary
# build whose `FusedDecode::record_body` skips the roles named in FUSELM_SKIP (qkv, att, up,
# down; the patch is in bench/results/skip-roles-h200-2026-11-25/README.md) runs the fused
# step's profile (`fuselm bench --profile`: the whole step in one pass, timestamps) with each
# set left out, ROUNDS rounds. Timings only: the tokens are wrong without every role.
# Model in two calls (PART=1, PART=2), then this call with .gl and .bench-carry/skip.
source bench/gpu-model.sh
exec > >(tee -a "$OUT/log.txt") 2>&1
xz -dc .bench-carry/skip/fuselm-skip.xz > /tmp/fuselm-skip && chmod +x /tmp/fuselm-skip
for round in $(seq "${ROUNDS:-2}"); do
  for s in none down qkv up att qkv,down att,up qkv,att,up,down; do
    json="$OUT/skip-${s//,/+}-$round.json"
    FUSELM_SKIP=$s /tmp/fuselm-skip bench --model $M --strategies fused --profile --no-long --runs 1 --out "$json" >/dev/null 2>&1
    python3 -c "import json,sys; p=json.load(open(sys.argv[1]))['report']['profile'][0]; print('round $round skip %-18s step %6.1f us' % (sys.argv[2], p['stepMicroseconds']))" "$json" "$s"
  done
done
