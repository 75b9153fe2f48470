// Evolution strategies on the GPU (OpenAI-ES with antithetic sampling and centred ranks), three
// kernel roles in one file, selected by the prepended ES_ROLE; a generation is four dispatches
// (perturb, sim_rollout.wgsl, rank, update) recorded back to back, so any number of
// generations runs in one compute pass with nothing read back in between. CPU reference:
// sim::es (same noise, same order of operations).
//
// Noise: eps(gen, pair, j) ~ N(0, 1) by Box-Muller from two counter-based uniforms of
// (seed_g = pcg(seed + gen), pair, 2j / 2j + 1); member 2p is theta + sigma eps(p), member 2p + 1
// is theta - sigma eps(p). Nothing stores the noise: update regenerates it.
//
//   ES_ROLE 0, perturb (one invocation per member): params[m] = theta +- sigma eps(m / 2)
//   ES_ROLE 1, rank (one invocation per member): w[m] = rank(m) / (P - 1) - 0.5, rank by
//     (total reward, then member index); invocation 0 also writes the generation's
//     (mean reward, best reward, best member) to stats[gen].
//   ES_ROLE 2, update (one invocation per parameter): theta[j] += lr / (P sigma) *
//     sum_p (w[2p] - w[2p + 1]) eps(p, j)

struct Params {
    seed: u32,
    gen: u32,
    sigma: f32,
    lr: f32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> theta: array<f32>;         // [N_PARAMS]
@group(0) @binding(2) var<storage, read_write> params: array<f32>;        // [POPULATION, N_PARAMS]
@group(0) @binding(3) var<storage, read_write> fitness: array<vec2<u32>>; // [POPULATION]
@group(0) @binding(4) var<storage, read_write> weights: array<f32>;       // [POPULATION]
@group(0) @binding(5) var<storage, read_write> stats: array<vec4<f32>>;   // [generations]

fn eps(seed_g: u32, pair: u32, j: u32) -> f32 {
    let u1 = sim_uniform(seed_g, pair, 2u * j, 0.0, 1.0);
    let u2 = sim_uniform(seed_g, pair, 2u * j + 1u, 0.0, 1.0);
    return sqrt(-2.0 * log(1.0 - u1)) * sim_cos(2.0 * PI * u2);
}

fn reward(m: u32) -> f32 {
    return bitcast<f32>(fitness[m].x);
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let i = gid.x + gid.y * nwg.x * 64u;
    let seed_g = sim_pcg(p.seed + p.gen);
    if ES_ROLE == 0u {
        if i >= POPULATION {
            return;
        }
        let sign = select(-1.0, 1.0, i % 2u == 0u);
        for (var j = 0u; j < N_PARAMS; j++) {
            params[i * N_PARAMS + j] = theta[j] + sign * p.sigma * eps(seed_g, i / 2u, j);
        }
    } else if ES_ROLE == 1u {
        if i >= POPULATION {
            return;
        }
        let f = reward(i);
        var rank = 0u;
        for (var k = 0u; k < POPULATION; k++) {
            let g = reward(k);
            if g < f || (g == f && k < i) {
                rank++;
            }
        }
        weights[i] = f32(rank) / f32(POPULATION - 1u) - 0.5;
        if i == 0u {
            var sum = 0.0;
            var best = reward(0u);
            var arg = 0u;
            for (var k = 0u; k < POPULATION; k++) {
                let g = reward(k);
                sum += g;
                if g > best {
                    best = g;
                    arg = k;
                }
            }
            stats[p.gen] = vec4<f32>(sum / f32(POPULATION), best, f32(arg), 0.0);
        }
    } else {
        if i >= N_PARAMS {
            return;
        }
        var g = 0.0;
        for (var q = 0u; q < POPULATION / 2u; q++) {
            g += (weights[2u * q] - weights[2u * q + 1u]) * eps(seed_g, q, i);
        }
        theta[i] += p.lr / (f32(POPULATION) * p.sigma) * g;
    }
}
