#!/usr/bin/env bash
# Population rollouts on the lent GPU, one lease: `fuselm sim-bench` (native: fused vs unfused,
# populations 1,000 and 10,000 × episodes 200, 500, 1,500, Pendulum and Acrobot with a 16-unit
# tanh MLP), then the PyTorch peer (bench/peers/sim_torch.py: eager and one CUDA graph per
# episode) and the JAX peer (bench/peers/sim_jax.py: jitted lax.scan of a vmap) on the same GPU. Carry .gl and .bench-carry/sim (fuselm.xz, built here). Results:
# $OUT/sim-bench-native.json, $OUT/sim-torch.jsonl, $OUT/sim-jax.jsonl.
set -euo pipefail
source bench/gpu-vulkan.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
xz -dc .bench-carry/sim/fuselm.xz > /root/fuselm; chmod +x /root/fuselm
/root/fuselm sim-bench --runs "${RUNS:-5}" --out "$OUT/sim-bench-native.json" 2>&1 | tail -30
if [ -z "${NO_PEERS:-}" ]; then
  python3 bench/peers/sim_torch.py --runs "${PEER_RUNS:-3}" > "$OUT/sim-torch.jsonl" 2>"$OUT/sim-torch.err" || true
  cat "$OUT/sim-torch.jsonl" | python3 -c "
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    g = d.get('generationsPerSecond', {}).get('median')
    print(d['peer'], d['env'], d['population'], d['episodeLength'], round(g, 1) if g else d.get('error'))
"
  tail -3 "$OUT/sim-torch.err"
  python3 bench/peers/sim_jax.py --runs "${PEER_RUNS:-3}" > "$OUT/sim-jax.jsonl" 2>"$OUT/sim-jax.err" || true
  cat "$OUT/sim-jax.jsonl" | python3 -c "
import json, sys
for l in sys.stdin:
    d = json.loads(l)
    print(d['peer'], d['env'], d['population'], d['episodeLength'], round(d['generationsPerSecond']['median'], 1), 'compile %.1f s' % d['compileSeconds'])
"
  tail -3 "$OUT/sim-jax.err"
fi
