#!/usr/bin/env python3
"""A model of the fused strategy's chunk loop (src/model/generation.rs), for choosing chunk sizes.

The host records chunk k + 1 (s steps at H seconds each, plus C per chunk) and submits it, then
waits for chunk k's tokens (they arrive LAT after the GPU finishes it); the GPU runs a step in G.
Prints decode tok/s for 128 tokens under the chunk policies compared in bench/NOTES.md ("Chunks
that follow the host"). Usage: bench/chunk-model.py [H G LAT C] (seconds; default: the Dawn path
of the H200 lease that decoded at 1,134 tok/s, 675e-6 700e-6 150e-6 200e-6).
"""
import math
import sys
from collections import deque


def run(h, g, lat, c, policy, n=128, prefill=0.004, first=4, cap=32):
    t = 0.0
    gpu_free = prefill
    pending = deque([(prefill, 0)])  # (GPU done time, decode steps)
    recorded, state = 1, {"next": first, "last": None}
    while pending:
        done, ran = pending.popleft()
        while not pending and recorded < n:
            s = min(state["next"], n - recorded)
            r = s * h + c
            t += r
            gpu_free = max(t, gpu_free) + s * g
            pending.append((gpu_free, s))
            recorded += s
            state["last"] = (s, r)
        wait = max(0.0, done + lat - t)
        t += wait
        if ran:
            policy(state, ran, wait, first, cap)
    return n / t


def doubling(state, ran, wait, first, cap):
    state["next"] = min(state["next"] * 2, cap)


def ramp(state, ran, wait, first, cap):  # ChunkRamp (src/model/chunk_ramp.rs)
    s, r = state["last"]
    ratio = (r + wait) / r * s / ran
    state["next"] = max(first, min(cap, math.floor(s * min(ratio, 2.0))))


def constant(k):
    def policy(state, ran, wait, first, cap):
        state["next"] = k
    return policy


if __name__ == "__main__":
    h, g, lat, c = (float(x) for x in sys.argv[1:5]) if len(sys.argv) == 5 else (675e-6, 700e-6, 150e-6, 200e-6)
    for name, p in [("doubling to 32", doubling), ("constant 4", constant(4)),
                    ("constant 8", constant(8)), ("ChunkRamp", ramp)]:
        print(f"{name:15s} {run(h, g, lat, c, p):7.0f} tok/s")
