"""PyTorch peer of `fuselm sim-bench`: the same population rollouts (Gym's Pendulum-v1 and
Acrobot-v1 dynamics, a tanh MLP with 16 hidden units per member), vectorised over the population
and stepped in a Python loop — eager, and with the whole episode captured as one CUDA graph
(where capture works). One generation = parameters host → GPU, the episode, fitness GPU → host,
as in fuselm's. Prints one JSON line per configuration.

    python3 bench/peers/sim_torch.py --populations 1000,10000 --episodes 200,500,1500
"""
import argparse
import json
import math
import time

import torch

H = 16


def policy(params, obs, n_obs, n_out):
    # params: [pop, H*n_obs + H + n_out*H + n_out] (fuselm's layout)
    pop = params.shape[0]
    o = 0
    w1 = params[:, o:o + H * n_obs].view(pop, H, n_obs); o += H * n_obs
    b1 = params[:, o:o + H]; o += H
    w2 = params[:, o:o + n_out * H].view(pop, n_out, H); o += n_out * H
    b2 = params[:, o:o + n_out]
    h = torch.tanh(torch.bmm(w1, obs.unsqueeze(2)).squeeze(2) + b1)
    return torch.bmm(w2, h.unsqueeze(2)).squeeze(2) + b2


def pendulum_init(pop, g):
    th = (torch.rand(pop, generator=g, device="cuda") * 2 - 1) * math.pi
    thdot = torch.rand(pop, generator=g, device="cuda") * 2 - 1
    return th, thdot


def pendulum_step(params, state, total):
    th, thdot = state
    obs = torch.stack([torch.cos(th), torch.sin(th), thdot], 1)
    u = (2 * torch.tanh(policy(params, obs, 3, 1)[:, 0])).clamp(-2, 2)
    norm = torch.remainder(th + math.pi, 2 * math.pi) - math.pi
    costs = norm * norm + 0.1 * thdot * thdot + 0.001 * u * u
    newthdot = (thdot + (15.0 * torch.sin(th) + 3.0 * u) * 0.05).clamp(-8, 8)
    return (th + newthdot * 0.05, newthdot), total - costs


def acrobot_dsdt(s, a):
    t1, t2, d1_, d2_ = s
    c2, s2 = torch.cos(t2), torch.sin(t2)
    d1 = 0.25 + (1 + 0.25 + c2) + 2
    d2 = (0.25 + 0.5 * c2) + 1
    phi2 = 0.5 * 9.8 * torch.cos(t1 + t2 - math.pi / 2)
    phi1 = -0.5 * d2_ * d2_ * s2 - d2_ * d1_ * s2 + 1.5 * 9.8 * torch.cos(t1 - math.pi / 2) + phi2
    dd2 = (a + d2 / d1 * phi1 - 0.5 * d1_ * d1_ * s2 - phi2) / (0.25 + 1 - d2 * d2 / d1)
    dd1 = -(d2 * dd2 + phi1) / d1
    return (d1_, d2_, dd1, dd2)


def acrobot_init(pop, g):
    return tuple((torch.rand(pop, generator=g, device="cuda") * 2 - 1) * 0.1 for _ in range(4))


def acrobot_step(params, state, total, done):
    t1, t2, v1, v2 = state
    obs = torch.stack([torch.cos(t1), torch.sin(t1), torch.cos(t2), torch.sin(t2), v1, v2], 1)
    a = torch.argmax(policy(params, obs, 6, 3), 1).float() - 1
    add = lambda y, k, h: tuple(yi + h * ki for yi, ki in zip(y, k))
    k1 = acrobot_dsdt(state, a)
    k2 = acrobot_dsdt(add(state, k1, 0.1), a)
    k3 = acrobot_dsdt(add(state, k2, 0.1), a)
    k4 = acrobot_dsdt(add(state, k3, 0.2), a)
    y = tuple(s + 0.2 / 6 * (p + 2 * q + 2 * r + w) for s, p, q, r, w in zip(state, k1, k2, k3, k4))
    wrap = lambda x: torch.remainder(x + math.pi, 2 * math.pi) - math.pi
    new = (wrap(y[0]), wrap(y[1]), y[2].clamp(-4 * math.pi, 4 * math.pi), y[3].clamp(-9 * math.pi, 9 * math.pi))
    term = (-torch.cos(new[0]) - torch.cos(new[1] + new[0])) > 1.0
    live = ~done
    total = total + torch.where(live, torch.where(term, 0.0, -1.0), 0.0)
    state = tuple(torch.where(live, n, o) for n, o in zip(new, state))
    return state, total, done | term


def init_state(env, pop, g):
    return pendulum_init(pop, g) if env == "pendulum" else acrobot_init(pop, g)


def run_episode(env, params, length, state):
    pop = params.shape[0]
    total = torch.zeros(pop, device="cuda")
    if env == "pendulum":
        for _ in range(length):
            state, total = pendulum_step(params, state, total)
    else:
        done = torch.zeros(pop, dtype=torch.bool, device="cuda")
        for _ in range(length):
            state, total, done = acrobot_step(params, state, total, done)
    return total


def measure(fn, runs):
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    times.sort()
    return 1 / times[len(times) // 2], 1 / times[-1], 1 / times[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--populations", default="1000,10000")
    ap.add_argument("--episodes", default="200,500,1500")
    ap.add_argument("--envs", default="pendulum,acrobot")
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    dev = torch.cuda.get_device_name()
    for env in a.envs.split(","):
        n_obs, n_out = (3, 1) if env == "pendulum" else (6, 3)
        n_params = H * n_obs + H + n_out * H + n_out
        for pop in map(int, a.populations.split(",")):
            host = torch.rand(pop, n_params) * 2 - 1
            for length in map(int, a.episodes.split(",")):
                g = torch.Generator(device="cuda")

                def eager():
                    params = host.to("cuda", non_blocking=False)
                    return run_episode(env, params, length, init_state(env, pop, g)).cpu()

                row = {"peer": "pytorch-eager", "env": env, "population": pop, "episodeLength": length,
                       "device": dev, "torch": torch.__version__}
                gps = measure(eager, a.runs)
                print(json.dumps({**row, "generationsPerSecond": {"median": gps[0], "min": gps[1], "max": gps[2]}}), flush=True)
                # The whole episode as one CUDA graph: parameters and initial state copied into
                # static buffers (drawn outside the graph), then one replay.
                try:
                    static = torch.empty(pop, n_params, device="cuda")
                    static.copy_(host.to("cuda"))
                    s0 = tuple(t.clone() for t in init_state(env, pop, g))
                    s = torch.cuda.Stream()
                    s.wait_stream(torch.cuda.current_stream())
                    with torch.cuda.stream(s):
                        run_episode(env, static, length, s0)
                    torch.cuda.current_stream().wait_stream(s)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        out = run_episode(env, static, length, s0)

                    def graphed():
                        static.copy_(host.to("cuda"))
                        for dst, src in zip(s0, init_state(env, pop, g)):
                            dst.copy_(src)
                        graph.replay()
                        return out.cpu()

                    gps = measure(graphed, a.runs)
                    print(json.dumps({**row, "peer": "pytorch-cuda-graph",
                                      "generationsPerSecond": {"median": gps[0], "min": gps[1], "max": gps[2]}}), flush=True)
                except Exception as e:  # noqa: BLE001 - report and go on
                    print(json.dumps({**row, "peer": "pytorch-cuda-graph", "error": str(e)[:300]}), flush=True)


if __name__ == "__main__":
    main()
