// Greedy sampling on the GPU: the id of the largest logit, ties to the lowest id (as
// llama.cpp's greedy sampler, which keeps the first maximum). NaN logits are never chosen.
// The id is written to tokens[state.pos + state.n_tokens], the position it will occupy, so
// the next step's embed reads it with no CPU round trip and the tokens buffer ends up holding
// the whole sequence.
//
// One workgroup of 256: each invocation scans a strided slice (49k..256k logits), then a tree
// reduction over (value, id) pairs.

struct Params {
    n_vocab: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> logits: array<f32>;       // [n_vocab]
@group(0) @binding(3) var<storage, read_write> tokens: array<u32>; // [n_ctx] token id per position

const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;
var<workgroup> best_v: array<f32, WG>;
var<workgroup> best_i: array<u32, WG>;

// Whether candidate (v, i) beats (bv, bi).
fn better(v: f32, i: u32, bv: f32, bi: u32) -> bool {
    return i != NONE && (bi == NONE || v > bv || (v == bv && i < bi));
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    var bv = 0.0;
    var bi = NONE;
    for (var i = lid; i < p.n_vocab; i += WG) {
        let v = logits[i];
        if v == v && (bi == NONE || v > bv) { // v == v: skip NaN
            bv = v;
            bi = i;
        }
    }
    best_v[lid] = bv;
    best_i[lid] = bi;
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid < s && better(best_v[lid + s], best_i[lid + s], best_v[lid], best_i[lid]) {
            best_v[lid] = best_v[lid + s];
            best_i[lid] = best_i[lid + s];
        }
    }
    let dst = state.pos + state.n_tokens;
    if lid == 0u && dst < arrayLength(&tokens) {
        tokens[dst] = select(best_i[0], 0u, best_i[0] == NONE);
    }
}
