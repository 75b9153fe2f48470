// Policies (CPU reference: sim::policy::act): a member's parameters, at `base` in `params`,
// turn an observation into an action — the index of the largest output (lowest on ties) when
// DISCRETE, else ACTION_SCALE tanh(output). Linear: out = W obs + b. MLP (HIDDEN > 0): out = W2
// tanh(W1 obs + b1) + b2. Recurrent (RNN > 0): h = tanh(Wx obs + Wh h + b), out = Wo h + bo,
// h kept in `ph` from step to step (the kernel zeroes it at the episode's start with
// `policy_reset`, and the unfused kernel saves it between dispatches). Weights row-major, each
// layer's bias after its matrix. N_OBS, N_OUT, HIDDEN, RNN, DISCRETE, LANES, HPL are prepended;
// `params` is declared by the kernel.
//
// The kernel first copies the member's parameters into private memory (registers) with
// `policy_load` when they fit (PRIVATE_PARAMS: at most 256 floats), so a fused episode reads
// them from memory once instead of at every step; `base` then is 0.
//
// An MLP's hidden layer may be spread over LANES consecutive invocations of one subgroup
// (`policy_lanes`): lane l computes hidden units l, l + LANES, ... (HPL of them, W1's rows in
// `pw1`), and `policy_gather` (sim_policy_gather_*.wgsl) hands every lane all HIDDEN units, so
// each lane then computes the same output layer, action and environment step. Each unit and
// each output is summed in the same order as with one lane, so LANES never changes a result.

var<private> pp: array<f32, PP_LEN>;   // linear / recurrent: every parameter; MLP: W2, b2
var<private> pw1: array<f32, PW1_LEN>; // MLP: this lane's rows of W1, each followed by its b1
var<private> ph: array<f32, RNN_LEN>;
var<private> plane: u32; // this invocation's lane within its member's LANES
var<private> psg0: u32;  // the subgroup invocation id of its member's lane 0

// `local` is the invocation's index in its workgroup: with subgroups of a fixed SG_SIZE made of
// consecutive invocations, its subgroup invocation id is local % SG_SIZE.
fn policy_lanes(local: u32, lane: u32) {
    plane = lane;
    psg0 = local % SG_SIZE - lane;
}

fn policy_reset() {
    for (var i = 0u; i < RNN_LEN; i++) {
        ph[i] = 0.0;
    }
}

fn policy_load(base: u32) {
    if !PRIVATE_PARAMS {
        return;
    }
    if HIDDEN == 0u {
        for (var i = 0u; i < N_PARAMS; i++) {
            pp[i] = params[base + i];
        }
        return;
    }
    for (var k = 0u; k < HPL; k++) {
        let r = plane + k * LANES;
        for (var j = 0u; j <= N_OBS; j++) {
            var v = 0.0;
            if r < HIDDEN {
                v = params[base + select(r * N_OBS + j, HIDDEN * N_OBS + r, j == N_OBS)];
            }
            pw1[k * (N_OBS + 1u) + j] = v;
        }
    }
    for (var i = 0u; i < PP_LEN; i++) {
        pp[i] = params[base + HIDDEN * (N_OBS + 1u) + i];
    }
}

fn param(i: u32) -> f32 {
    if PRIVATE_PARAMS {
        return pp[i];
    }
    return params[i];
}

// The MLP's weights: W1[r][j] (k: r's slot in this lane), b1[r], and the output layer's i-th.
fn mlp_w1(base: u32, k: u32, r: u32, j: u32) -> f32 {
    if PRIVATE_PARAMS {
        return pw1[k * (N_OBS + 1u) + j];
    }
    return params[base + r * N_OBS + j];
}

fn mlp_b1(base: u32, k: u32, r: u32) -> f32 {
    if PRIVATE_PARAMS {
        return pw1[k * (N_OBS + 1u) + N_OBS];
    }
    return params[base + HIDDEN * N_OBS + r];
}

fn mlp_out(base: u32, i: u32) -> f32 {
    if PRIVATE_PARAMS {
        return pp[i];
    }
    return params[base + HIDDEN * (N_OBS + 1u) + i];
}

fn policy_act(base: u32, obs: array<f32, OBS_LEN>) -> f32 {
    var out: array<f32, OUT_LEN>;
    if RNN > 0u {
        // acc = Wx obs, then + Wh h_prev, then + b (sim::policy::act's order).
        let wh = base + RNN * N_OBS;
        let b = wh + RNN * RNN;
        var next: array<f32, RNN_LEN>;
        for (var r = 0u; r < RNN; r++) {
            var acc = 0.0;
            for (var j = 0u; j < N_OBS; j++) {
                acc += param(base + r * N_OBS + j) * obs[j];
            }
            for (var j = 0u; j < RNN; j++) {
                acc += param(wh + r * RNN + j) * ph[j];
            }
            next[r] = sim_tanh(acc + param(b + r));
        }
        ph = next;
        let wo = b + RNN;
        for (var r = 0u; r < N_OUT; r++) {
            var acc = 0.0;
            for (var j = 0u; j < RNN; j++) {
                acc += param(wo + r * RNN + j) * ph[j];
            }
            out[r] = acc + param(wo + N_OUT * RNN + r);
        }
    } else if HIDDEN == 0u {
        for (var r = 0u; r < N_OUT; r++) {
            var acc = 0.0;
            for (var j = 0u; j < N_OBS; j++) {
                acc += param(base + r * N_OBS + j) * obs[j];
            }
            out[r] = acc + param(base + N_OUT * N_OBS + r);
        }
    } else {
        var mine: array<f32, HPL_LEN>;
        for (var k = 0u; k < HPL; k++) {
            let r = plane + k * LANES;
            var acc = 0.0;
            for (var j = 0u; j < N_OBS; j++) {
                acc += mlp_w1(base, k, r, j) * obs[j];
            }
            mine[k] = sim_tanh(acc + mlp_b1(base, k, r));
        }
        let hid = policy_gather(mine);
        for (var r = 0u; r < N_OUT; r++) {
            var acc = 0.0;
            for (var j = 0u; j < HIDDEN; j++) {
                acc += mlp_out(base, r * HIDDEN + j) * hid[j];
            }
            out[r] = acc + mlp_out(base, N_OUT * HIDDEN + r);
        }
    }
    if DISCRETE {
        var best = 0u;
        for (var i = 1u; i < N_OUT; i++) {
            if out[i] > out[best] {
                best = i;
            }
        }
        return f32(best);
    }
    return ACTION_SCALE * sim_tanh(out[0]);
}
