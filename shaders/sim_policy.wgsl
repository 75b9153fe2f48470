// Policies (CPU reference: sim::policy::act): a member's parameters, at `base` in `params`,
// turn an observation into an action — the index of the largest output (lowest on ties) when
// DISCRETE, else ACTION_SCALE tanh(output). Linear: out = W obs + b. MLP (HIDDEN > 0): out = W2
// tanh(W1 obs + b1) + b2. Recurrent (RNN > 0): h = tanh(Wx obs + Wh h + b), out = Wo h + bo,
// h kept in `ph` from step to step (the kernel zeroes it at the episode's start with
// `policy_reset`, and the unfused kernel saves it between dispatches). Weights row-major, each
// layer's bias after its matrix. N_OBS, N_OUT, HIDDEN, RNN, DISCRETE are prepended; `params` is
// declared by the kernel.
//
// The kernel first copies the member's parameters into `pp` (private memory: registers) with
// `policy_load` when they fit (PRIVATE_PARAMS: at most 256 floats), so a fused episode reads
// them from memory once instead of at every step; `base` then is 0.

var<private> pp: array<f32, PP_LEN>;
var<private> ph: array<f32, RNN_LEN>;

fn policy_reset() {
    for (var i = 0u; i < RNN_LEN; i++) {
        ph[i] = 0.0;
    }
}

fn policy_load(base: u32) {
    if PRIVATE_PARAMS {
        for (var i = 0u; i < N_PARAMS; i++) {
            pp[i] = params[base + i];
        }
    }
}

fn param(i: u32) -> f32 {
    if PRIVATE_PARAMS {
        return pp[i];
    }
    return params[i];
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
        var hid: array<f32, HIDDEN_LEN>;
        for (var r = 0u; r < HIDDEN; r++) {
            var acc = 0.0;
            for (var j = 0u; j < N_OBS; j++) {
                acc += param(base + r * N_OBS + j) * obs[j];
            }
            hid[r] = sim_tanh(acc + param(base + HIDDEN * N_OBS + r));
        }
        let b2 = base + HIDDEN * N_OBS + HIDDEN;
        for (var r = 0u; r < N_OUT; r++) {
            var acc = 0.0;
            for (var j = 0u; j < HIDDEN; j++) {
                acc += param(b2 + r * HIDDEN + j) * hid[j];
            }
            out[r] = acc + param(b2 + N_OUT * HIDDEN + r);
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
