// Sampling, stage 1: the MAX_CANDIDATES best tokens of each slice of 1024 logits.
//
// z = logit * inv_temperature (the logits are already penalised by head_logits.wgsl). One
// workgroup per slice: load, sort 8 blocks of 128, merge to the slice's best 128 (sorted), write
// them to cand[slice]. sample_choose.wgsl merges the slices. NaN logits never become
// candidates (they are replaced by sentinels: z = SENTINEL_Z, id = NONE). Skipped (returns) when
// greedy or when state.done is set; the host only records it when sampling.

struct Params {
    n_vocab: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> sampler: Sampler;
@group(0) @binding(3) var<storage, read> logits: array<f32>;            // [vocab] penalised
@group(0) @binding(4) var<storage, read_write> cand: array<vec2<u32>>;  // [slices * 128]: (z bits, id)

var<workgroup> flag_sh: u32;

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    let inv_t = sampler.inv_temperature;
    for (var i = lid; i < KEYS; i += TOPK_WG) {
        let id = wg.x * KEYS + i;
        var z = SENTINEL_Z;
        var kid = NONE;
        if id < p.n_vocab {
            let v = logits[id] * inv_t;
            if v == v {
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
    if lid < BLOCK {
        cand[wg.x * BLOCK + lid] = vec2<u32>(bitcast<u32>(key_z[lid]), key_id[lid]);
    }
}
