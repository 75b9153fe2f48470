"""JAX peer of `fuselm sim-bench`: the same population rollouts (Pendulum-v1 and Acrobot-v1
dynamics, a 16-unit tanh MLP per member) as one jitted `lax.scan` over the episode's steps of a
`vmap` over the population — XLA compiles the whole episode into one program. One generation =
parameters host → GPU, the episode, fitness GPU → host. Prints one JSON line per configuration.

    python3 bench/peers/sim_jax.py --populations 1000,10000 --episodes 200,500,1500
"""
import argparse
import json
import math
import time

import jax
import jax.numpy as jnp
import numpy as np

H = 16


def policy(p, obs, n_obs, n_out):
    o = 0
    w1 = p[o:o + H * n_obs].reshape(H, n_obs); o += H * n_obs
    b1 = p[o:o + H]; o += H
    w2 = p[o:o + n_out * H].reshape(n_out, H); o += n_out * H
    b2 = p[o:o + n_out]
    return w2 @ jnp.tanh(w1 @ obs + b1) + b2


def pendulum_step(p, carry, _):
    (th, thdot), total = carry
    obs = jnp.stack([jnp.cos(th), jnp.sin(th), thdot])
    u = jnp.clip(2 * jnp.tanh(policy(p, obs, 3, 1)[0]), -2, 2)
    norm = jnp.remainder(th + math.pi, 2 * math.pi) - math.pi
    costs = norm * norm + 0.1 * thdot * thdot + 0.001 * u * u
    newthdot = jnp.clip(thdot + (15.0 * jnp.sin(th) + 3.0 * u) * 0.05, -8, 8)
    return ((th + newthdot * 0.05, newthdot), total - costs), None


def dsdt(s, a):
    t1, t2, v1, v2 = s
    c2, s2 = jnp.cos(t2), jnp.sin(t2)
    d1 = 0.25 + (1 + 0.25 + c2) + 2
    d2 = (0.25 + 0.5 * c2) + 1
    phi2 = 0.5 * 9.8 * jnp.cos(t1 + t2 - math.pi / 2)
    phi1 = -0.5 * v2 * v2 * s2 - v2 * v1 * s2 + 1.5 * 9.8 * jnp.cos(t1 - math.pi / 2) + phi2
    dd2 = (a + d2 / d1 * phi1 - 0.5 * v1 * v1 * s2 - phi2) / (0.25 + 1 - d2 * d2 / d1)
    dd1 = -(d2 * dd2 + phi1) / d1
    return jnp.stack([v1, v2, dd1, dd2])


def acrobot_step(p, carry, _):
    s, total, done = carry
    obs = jnp.stack([jnp.cos(s[0]), jnp.sin(s[0]), jnp.cos(s[1]), jnp.sin(s[1]), s[2], s[3]])
    a = jnp.argmax(policy(p, obs, 6, 3)).astype(jnp.float32) - 1
    k1 = dsdt(s, a)
    k2 = dsdt(s + 0.1 * k1, a)
    k3 = dsdt(s + 0.1 * k2, a)
    k4 = dsdt(s + 0.2 * k3, a)
    y = s + 0.2 / 6 * (k1 + 2 * k2 + 2 * k3 + k4)
    wrap = lambda x: jnp.remainder(x + math.pi, 2 * math.pi) - math.pi
    new = jnp.stack([wrap(y[0]), wrap(y[1]), jnp.clip(y[2], -4 * math.pi, 4 * math.pi),
                     jnp.clip(y[3], -9 * math.pi, 9 * math.pi)])
    term = (-jnp.cos(new[0]) - jnp.cos(new[1] + new[0])) > 1.0
    total = total + jnp.where(done, 0.0, jnp.where(term, 0.0, -1.0))
    return (jnp.where(done, s, new), total, done | term), None


def make(env, length):
    def one(p, s0):
        if env == "pendulum":
            ((_, _), total), _ = jax.lax.scan(lambda c, x: pendulum_step(p, c, x), ((s0[0], s0[1]), 0.0), None, length=length)
        else:
            (_, total, _), _ = jax.lax.scan(lambda c, x: acrobot_step(p, c, x), (s0, 0.0, False), None, length=length)
        return total
    return jax.jit(jax.vmap(one))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--populations", default="1000,10000")
    ap.add_argument("--episodes", default="200,500,1500")
    ap.add_argument("--envs", default="pendulum,acrobot")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    dev = str(jax.devices()[0])
    rng = np.random.default_rng(1)
    for env in a.envs.split(","):
        n_obs, n_out = (3, 1) if env == "pendulum" else (6, 3)
        n_params = H * n_obs + H + n_out * H + n_out
        for pop in map(int, a.populations.split(",")):
            host = rng.uniform(-1, 1, (pop, n_params)).astype(np.float32)
            for length in map(int, a.episodes.split(",")):
                f = make(env, length)

                def gen():
                    s0 = rng.uniform(-0.1, 0.1, (pop, 4)).astype(np.float32)
                    return np.asarray(f(jnp.asarray(host), jnp.asarray(s0)))

                t0 = time.perf_counter()
                gen()  # compile + warm-up
                compile_s = time.perf_counter() - t0
                times = []
                for _ in range(a.runs):
                    t0 = time.perf_counter()
                    gen()
                    times.append(time.perf_counter() - t0)
                times.sort()
                print(json.dumps({"peer": "jax-lax-scan", "env": env, "population": pop, "episodeLength": length,
                                  "device": dev, "jax": jax.__version__, "compileSeconds": compile_s,
                                  "generationsPerSecond": {"median": 1 / times[len(times) // 2], "min": 1 / times[-1], "max": 1 / times[0]}}), flush=True)


if __name__ == "__main__":
    main()
