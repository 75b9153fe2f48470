// Unfused simulation, the baseline: one dispatch advances every member by ONE step, as a
// framework stepping a vectorised environment does; the host records one per step of the episode. Each
// member's running state lives in `state` between dispatches, STRIDE = STATE_LEN + 4 + RNN floats:
// (s[0..STATE_LEN], total reward, steps, done (1.0 / 0.0), pad, a recurrent policy's h[0..RNN]); steps are counted in f32, exact below 2^24. The first dispatch (p.first = 1) also draws the initial state. Same environment,
// policy and arithmetic as sim_rollout.wgsl, so both give identical results.

struct Params {
    seed: u32,
    first: u32,
    episode: u32, // unused here: the host records one dispatch per step
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> params: array<f32>;           // [population, N_PARAMS]
@group(0) @binding(2) var<storage, read_write> state: array<f32>;      // [population, STRIDE]

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let member = gid.x + gid.y * nwg.x * 64u;
    if member >= POPULATION {
        return;
    }
    let at = member * STRIDE;
    let bk = at + STATE_LEN; // bookkeeping: total, steps, done
    var s: array<f32, STATE_LEN>;
    var total = 0.0;
    var steps = 0u;
    policy_reset();
    if p.first == 1u {
        s = env_init(p.seed, member);
    } else {
        for (var i = 0u; i < RNN; i++) {
            ph[i] = state[bk + 4u + i];
        }
        if state[bk + 2u] != 0.0 {
            return;
        }
        for (var i = 0u; i < STATE_LEN; i++) {
            s[i] = state[at + i];
        }
        total = state[bk];
        steps = u32(state[bk + 1u]);
    }
    policy_load(member * N_PARAMS);
    let pbase = select(member * N_PARAMS, 0u, PRIVATE_PARAMS);
    let r = env_step(s, policy_act(pbase, env_observe(s)));
    for (var i = 0u; i < STATE_LEN; i++) {
        state[at + i] = r.s[i];
    }
    state[bk] = total + r.reward;
    state[bk + 1u] = f32(steps + 1u);
    state[bk + 2u] = select(0.0, 1.0, r.terminated);
    for (var i = 0u; i < RNN; i++) {
        state[bk + 4u + i] = ph[i];
    }
}
