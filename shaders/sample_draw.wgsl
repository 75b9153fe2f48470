// The last stage of sampling and the step's bookkeeping, shared by sample_choose.wgsl and
// megakernel.wgsl (prepended after sampler_params.wgsl and sample_topk.wgsl). The including
// module declares `sampler`, `state`, `tokens` and `counts`.
//
// * `fill_q`: q[i] = exp(z_i - z_0) of the MAX_CANDIDATES best keys (block 0 of the top-k
//   arrays, sorted), 0 for empty slots. Called uniformly by all 256 invocations.
// * `draw`: by ONE invocation, in the CPU reference's (`sampling::reference`) order and f32
//   arithmetic: top-k, top-p, min-p, then a draw with the counter-based RNG at `position`.
// * `commit`: by ONE invocation: tokens[P] = id for P = pos + n_tokens; the penalty window's
//   counts move on (id enters, tokens[P - last_n] leaves); a stop id sets state.done, which
//   turns every later recorded kernel into a no-op; state advances (pos = P, n_tokens = 1).
//   NONFINITE (a non-finite logit) is written as the token, sets state.done and advances the
//   state; the penalty window is left as it was.

var<workgroup> q_sh: array<f32, MAX_CANDIDATES>;

fn fill_q(lid: u32) {
    if lid < MAX_CANDIDATES {
        q_sh[lid] = select(0.0, exp(key_z[lid] - key_z[0]), key_id[lid] != NONE);
    }
    workgroupBarrier();
}

fn draw(position: u32) -> u32 {
    var n = min(MAX_CANDIDATES, sampler.top_k);
    if sampler.top_p < 1.0 {
        var total = 0.0;
        for (var i = 0u; i < n; i++) {
            total += q_sh[i];
        }
        var cum = 0.0;
        for (var i = 0u; i < n; i++) {
            cum += q_sh[i];
            if cum >= sampler.top_p * total {
                n = i + 1u;
                break;
            }
        }
    }
    if sampler.min_p > 0.0 {
        for (var i = 1u; i < n; i++) {
            if q_sh[i] < sampler.min_p {
                n = i;
                break;
            }
        }
    }
    var total = 0.0;
    for (var i = 0u; i < n; i++) {
        total += q_sh[i];
    }
    let goal = uniform01(sampler.seed_lo, sampler.seed_hi, position) * total;
    var chosen = n - 1u;
    var cum = 0.0;
    for (var i = 0u; i < n; i++) {
        cum += q_sh[i];
        if goal < cum {
            chosen = i;
            break;
        }
    }
    return key_id[chosen];
}

// `n_ctx`: the tokens buffer's length.
fn commit(chosen: u32, n_ctx: u32) {
    var id = chosen;
    if id == NONE {
        id = 0u;
    }
    let at = state.pos + state.n_tokens;
    if id == NONFINITE {
        if at < n_ctx {
            tokens[at] = NONFINITE;
        }
        state.done = 1u;
        state.pos = at; // the megakernel's host counts tokens by position
        state.n_tokens = 1u;
        return;
    }
    if at < n_ctx {
        tokens[at] = id;
    }
    if sampler.penalties_on != 0u {
        counts[id] += 1u;
        if at >= sampler.penalty_last_n && at - sampler.penalty_last_n < n_ctx {
            let old = tokens[at - sampler.penalty_last_n];
            counts[old] -= 1u;
        }
    }
    for (var i = 0u; i < min(sampler.n_stop, 16u); i++) {
        if sampler.stop_ids[i] == id {
            state.done = 1u;
        }
    }
    state.pos = at;
    state.n_tokens = 1u;
}
