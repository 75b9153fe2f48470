// Log-probabilities, stage 1: for each slice of 1024 logits, its TOP_MAX best (logit, id),
// best first, and (m, S): the slice's largest logit and the sum of exp(logit - m) over it.
//
// The logits are the ones the sampler ranks (head_logits.wgsl: penalised, and MASKED_LOGIT
// where a constraint disallows the id), at temperature 1. One workgroup per slice: load, sort
// the 8 blocks of 128 (sample_topk.wgsl), merge to the slice's best 128, write the first
// TOP_MAX; then S from the same logits (a masked logit adds exp(-f32::MAX - m) = 0 beside an
// allowed one; a slice with no allowed id has m near -f32::MAX, and logprob_choose weighs it by
// exp(m - M) = 0). Non-finite logits never become candidates and add nothing (the step fails
// as `numerical` anyway).
// logprob_choose.wgsl merges the slices. Skipped when state.done is set.

struct Params {
    n_vocab: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> logits: array<f32>;             // [vocab]
@group(0) @binding(3) var<storage, read_write> lists: array<vec2<u32>>;  // [slices * TOP_MAX]: (z bits, id)
@group(0) @binding(4) var<storage, read_write> ms: array<vec2<f32>>;     // [slices]: (m, S)

var<workgroup> flag_sh: u32;
var<workgroup> red: array<f32, 256>;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    for (var i = lid; i < KEYS; i += TOPK_WG) {
        let id = wg.x * KEYS + i;
        var z = SENTINEL_Z;
        var kid = NONE;
        if id < p.n_vocab {
            let v = logits[id];
            if !non_finite(v) {
                z = v;
                kid = id;
            }
        }
        key_z[i] = z;
        key_id[i] = kid;
    }
    workgroupBarrier();
    sort_blocks(lid);
    merge_tree(lid);
    if lid < TOP_MAX {
        lists[wg.x * TOP_MAX + lid] = vec2<u32>(bitcast<u32>(key_z[lid]), key_id[lid]);
    }
    let m = key_z[0];
    var s = 0.0;
    for (var i = lid; i < KEYS; i += TOPK_WG) {
        let id = wg.x * KEYS + i;
        if id < p.n_vocab {
            let v = logits[id];
            if !non_finite(v) {
                s += exp(v - m);
            }
        }
    }
    red[lid] = s;
    for (var k = 128u; k > 0u; k >>= 1u) {
        workgroupBarrier();
        if lid < k {
            red[lid] += red[lid + k];
        }
    }
    if lid == 0u {
        ms[wg.x] = vec2<f32>(m, red[0]);
    }
}
