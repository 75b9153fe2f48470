// Sampling, stage 2 (one workgroup): choose the next token, then do the step's bookkeeping on
// the GPU so the next step needs nothing from the host.
//
// Greedy (inv_temperature == 0): the best of head_logits' per-workgroup bests (largest
// penalised logit, lowest id on ties). Otherwise: merge the per-slice candidate lists of
// sample_select.wgsl 7 at a time into the overall best MAX_CANDIDATES (sorted), then — by one
// invocation, in the CPU reference's order and f32 arithmetic — top-k, top-p, min-p and a draw
// with the counter-based RNG at this token's position (`draw`, sample_draw.wgsl).
//
// Bookkeeping (one invocation, `commit` in sample_draw.wgsl): the token is written, the
// penalty window moves on, a stop id sets state.done, state advances; a non-finite logit
// (head_logits.wgsl marks its workgroup's best) makes the token NONFINITE and ends the
// generation; with a constraint
// (`sampler.constrained`), its DFA state (`state.aux`) walks the token's bytes
// (`advance_constraint`; the table's layout is `kernels::constraint`).

struct Params {
    n_best: u32,  // per-workgroup bests written by head_logits
    n_lists: u32, // candidate lists written by sample_select (0 when greedy)
    n_ctx: u32,   // tokens buffer length
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read_write> state: State;
@group(0) @binding(2) var<storage, read> sampler: Sampler;
@group(0) @binding(3) var<storage, read> best: array<vec2<u32>>;
@group(0) @binding(4) var<storage, read> cand: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read_write> tokens: array<u32>;
@group(0) @binding(6) var<storage, read_write> counts: array<u32>;
@group(0) @binding(7) var<storage, read> table: array<u32>; // the constraint (16 bytes: none)

// The DFA state after the bytes of `id` (an end-of-generation id has none).
fn advance_constraint(id: u32) {
    let n_classes = table[1];
    let starts = table[T_TOKEN_STARTS];
    let bytes = table[T_TOKEN_BYTES];
    var s = state.aux;
    for (var k = table[starts + id]; k < table[starts + id + 1u]; k++) {
        let b = (table[bytes + k / 4u] >> ((k % 4u) * 8u)) & 0xffu;
        s = table[table[T_TRANS] + s * n_classes + table[table[T_CLASSES] + b]];
    }
    state.aux = s;
}

var<workgroup> mode_sh: u32; // 0: done, 1: greedy, 2: sample
var<workgroup> bad_sh: atomic<u32>; // sampling: 1 when a head workgroup saw a non-finite logit
var<workgroup> bad_u: u32;
var<workgroup> red_z: array<f32, 256>;
var<workgroup> red_id: array<u32, 256>;

fn load_list(list: u32, slot: u32, lid: u32) {
    if lid < BLOCK {
        var z = SENTINEL_Z;
        var id = NONE;
        if list < p.n_lists {
            let c = cand[list * BLOCK + lid];
            z = bitcast<f32>(c.x);
            id = c.y;
        }
        key_z[slot * BLOCK + lid] = z;
        key_id[slot * BLOCK + lid] = id;
    }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    if lid == 0u {
        mode_sh = select(select(2u, 1u, sampler.inv_temperature == 0.0), 0u, state.done != 0u);
    }
    let mode = workgroupUniformLoad(&mode_sh);
    if mode == 0u {
        return;
    }
    var id = NONE;
    if mode == 1u {
        var bz = 0.0;
        var bi = NONE;
        for (var i = lid; i < p.n_best; i += 256u) {
            let b = best[i];
            let z = bitcast<f32>(b.x);
            if b.y != NONE && (bi == NONE || better(z, b.y, bz, bi)) {
                bz = z;
                bi = b.y;
            }
        }
        red_z[lid] = bz;
        red_id[lid] = bi;
        for (var s = 128u; s > 0u; s >>= 1u) {
            workgroupBarrier();
            if lid < s {
                let oz = red_z[lid + s];
                let oi = red_id[lid + s];
                if oi != NONE && (red_id[lid] == NONE || better(oz, oi, red_z[lid], red_id[lid])) {
                    red_z[lid] = oz;
                    red_id[lid] = oi;
                }
            }
        }
        id = red_id[0];
    } else {
        // A non-finite logit anywhere ends the generation (greedy: it wins the reduction).
        for (var i = lid; i < p.n_best; i += 256u) {
            if best[i].y == NONFINITE {
                atomicStore(&bad_sh, 1u);
            }
        }
        workgroupBarrier();
        if lid == 0u {
            bad_u = atomicLoad(&bad_sh);
        }
        if workgroupUniformLoad(&bad_u) != 0u {
            if lid == 0u {
                commit(NONFINITE, p.n_ctx);
            }
            return;
        }
        // Block 0 accumulates the best 128; each round brings up to 7 more lists.
        for (var s = 0u; s < SLOTS; s++) {
            load_list(s, s, lid);
        }
        workgroupBarrier();
        merge_tree(lid);
        for (var next = SLOTS; next < p.n_lists; next += SLOTS - 1u) {
            for (var s = 1u; s < SLOTS; s++) {
                load_list(next + s - 1u, s, lid);
            }
            workgroupBarrier();
            merge_tree(lid);
        }
        fill_q(lid);
        if lid == 0u {
            id = draw(state.pos + state.n_tokens);
        }
    }
    if lid != 0u {
        return;
    }
    commit(id, p.n_ctx);
    if sampler.constrained != 0u && id != NONE && id != NONFINITE {
        advance_constraint(id);
    }
}
