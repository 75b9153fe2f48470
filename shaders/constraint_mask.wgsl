// Constrained generation, before the head: marks in `counts` which ids the constraint allows
// at its current state (`state.aux`, advanced by sample_choose.wgsl), so head_logits
// gives every other id the logit MASKED_LOGIT (sampler_params.wgsl: `penalize`) and neither
// the greedy choice nor the sampler can pick it.
//
//   counts[id] = (counts[id] & ~MASKED_BIT) | (MASKED_BIT unless bit id of mask(state) is set)
//
// One invocation per mask word (32 ids). The table's layout is `kernels::constraint` (header
// of 16 words, then the sections it points at). When state.done is set it returns at once.

struct Params {
    words: u32,   // mask words: ceil(n_vocab / 32)
    n_vocab: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> table: array<u32>;
@group(0) @binding(3) var<storage, read_write> counts: array<u32>; // [vocab]

@compute @workgroup_size(256)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let w = linear_group(wg, nwg) * 256u + lid;
    if state.done != 0u || w >= p.words {
        return;
    }
    let mask = table[table[T_MASK_OF_STATE] + state.aux];
    let bits = table[table[T_MASKS] + mask * p.words + w];
    for (var b = 0u; b < 32u; b++) {
        let id = w * 32u + b;
        if id < p.n_vocab {
            let masked = select(MASKED_BIT, 0u, ((bits >> b) & 1u) != 0u);
            counts[id] = (counts[id] & ~MASKED_BIT) | masked;
        }
    }
}
