// Fused simulation: one invocation per member runs its whole episode — observe, act, step,
// p.episode times at most — inside one dispatch for the whole population, and writes its
// fitness (total reward, steps). With RASTRIGIN the member's parameters are the point and the
// fitness is -f(x) after one evaluation. The environment (sim_env_*.wgsl), the policy
// (sim_policy.wgsl) and the constants are prepended by `sim::gpu`.

struct Params {
    seed: u32,
    _pad0: u32,
    episode: u32, // steps per episode (a uniform: a constant trip count invites full unrolling)
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> params: array<f32>;             // [population, N_PARAMS]
@group(0) @binding(2) var<storage, read_write> fitness: array<vec2<u32>>; // (reward bits, steps)

// The Rastrigin function, f(x) = 10 n + sum(x_i^2 - 10 cos(2 pi x_i)), of a member's
// parameters (CPU reference: sim::envs::rastrigin).
fn rastrigin(base: u32) -> f32 {
    var sum = 10.0 * f32(N_PARAMS);
    for (var i = 0u; i < N_PARAMS; i++) {
        let v = params[base + i];
        sum += v * v - 10.0 * sim_cos(2.0 * PI * v);
    }
    return sum;
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let member = gid.x + gid.y * nwg.x * 64u;
    if member >= POPULATION {
        return;
    }
    let base = member * N_PARAMS;
    if RASTRIGIN {
        fitness[member] = vec2<u32>(bitcast<u32>(-rastrigin(base)), 1u);
        return;
    }
    policy_load(base);
    policy_reset();
    let pbase = select(base, 0u, PRIVATE_PARAMS);
    var s = env_init(p.seed, member);
    var total = 0.0;
    var steps = 0u;
    for (var t = 0u; t < p.episode; t++) {
        let action = policy_act(pbase, env_observe(s));
        let r = env_step(s, action);
        total += r.reward;
        steps += 1u;
        s = r.s;
        if r.terminated {
            break;
        }
    }
    fitness[member] = vec2<u32>(bitcast<u32>(total), steps);
}
