// Log-probabilities, stage 2 (one workgroup, after sample_choose.wgsl committed the step's
// token at tokens[state.pos]): the token's log-probability and the TOP_N most likely ids'.
//
//   M = max_s m_s,  L = sum_s S_s exp(m_s - M),  logprob(id) = logit[id] - M - ln L
//
// over logprob_slices.wgsl's per-slice (m, S); the best TOP_N come from merging its per-slice
// lists: each round loads up to 6 lists of TOP_MAX into each of blocks 1..7 (round 0: 0..7),
// sorts the blocks and merges them into block 0 (sample_topk.wgsl), so block 0 ends with the
// best 128 of every list. Ids the constraint disallows (logit MASKED_LOGIT) are left out of
// the list. Written to out[pos * LOGPROB_STRIDE ..]: (logprob bits, n, then n pairs (id,
// logprob bits)), `kernels::logprobs` reads it back. Skipped when state.done is set (a stop
// id was chosen: it is not part of the output).

struct Params {
    n_lists: u32,
    top_n: u32,
    n_ctx: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> logits: array<f32>;        // [vocab]
@group(0) @binding(3) var<storage, read> lists: array<vec2<u32>>;   // [lists * TOP_MAX]
@group(0) @binding(4) var<storage, read> ms: array<vec2<f32>>;      // [lists]
@group(0) @binding(5) var<storage, read> tokens: array<u32>;        // [n_ctx]
@group(0) @binding(6) var<storage, read_write> out: array<u32>;     // [n_ctx * LOGPROB_STRIDE]

const PER_BLOCK: u32 = BLOCK / TOP_MAX; // whole lists per block

var<workgroup> flag_sh: u32;
var<workgroup> red: array<f32, 256>;

// Block `b` gets lists first .. first + PER_BLOCK (sentinels past them and past the end).
fn load_block(b: u32, first: u32, lid: u32) {
    if lid < BLOCK {
        let list = first + lid / TOP_MAX;
        var z = SENTINEL_Z;
        var id = NONE;
        if lid < PER_BLOCK * TOP_MAX && list < p.n_lists {
            let c = lists[list * TOP_MAX + lid % TOP_MAX];
            z = bitcast<f32>(c.x);
            id = c.y;
        }
        key_z[b * BLOCK + lid] = z;
        key_id[b * BLOCK + lid] = id;
    }
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) lid: u32) {
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    // M, then L.
    var mx = SENTINEL_Z;
    for (var s = lid; s < p.n_lists; s += 256u) {
        mx = max(mx, ms[s].x);
    }
    red[lid] = mx;
    for (var k = 128u; k > 0u; k >>= 1u) {
        workgroupBarrier();
        if lid < k {
            red[lid] = max(red[lid], red[lid + k]);
        }
    }
    workgroupBarrier();
    let big_m = red[0];
    workgroupBarrier();
    var l = 0.0;
    for (var s = lid; s < p.n_lists; s += 256u) {
        let v = ms[s];
        l += v.y * exp(v.x - big_m);
    }
    red[lid] = l;
    for (var k = 128u; k > 0u; k >>= 1u) {
        workgroupBarrier();
        if lid < k {
            red[lid] += red[lid + k];
        }
    }
    workgroupBarrier();
    let norm = big_m + log(red[0]);

    // The best TOP_N: rounds of sort + merge into block 0.
    if p.top_n > 0u {
        for (var b = 0u; b < SLOTS; b++) {
            load_block(b, b * PER_BLOCK, lid);
        }
        workgroupBarrier();
        sort_blocks(lid);
        merge_tree(lid);
        for (var next = SLOTS * PER_BLOCK; next < p.n_lists; next += (SLOTS - 1u) * PER_BLOCK) {
            for (var b = 1u; b < SLOTS; b++) {
                load_block(b, next + (b - 1u) * PER_BLOCK, lid);
            }
            workgroupBarrier();
            sort_blocks(lid);
            merge_tree(lid);
        }
    }
    if lid != 0u {
        return;
    }
    let at = state.pos;
    if at >= p.n_ctx {
        return;
    }
    let base = at * LOGPROB_STRIDE;
    out[base] = bitcast<u32>(logits[tokens[at]] - norm);
    var n = 0u;
    for (var i = 0u; i < min(p.top_n, TOP_MAX); i++) {
        // Past the candidates, or disallowed by the constraint (MASKED_LOGIT, below -1e38).
        if key_id[i] == NONE || key_z[i] < -1.0e38 {
            break;
        }
        out[base + 2u + 2u * n] = key_id[i];
        out[base + 3u + 2u * n] = bitcast<u32>(key_z[i] - norm);
        n++;
    }
    out[base + 1u] = n;
}
