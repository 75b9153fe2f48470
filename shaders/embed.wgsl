// Token embedding: out[t] = table[tokens[state.pos + t]] as f32 * scale, for t < state.n_tokens.
//
// The token ids are read from the GPU `tokens` buffer (one id per position; the prompt is
// written there once, argmax appends each generated id), never from a uniform, so decode steps
// need no CPU writes. A table too large for one storage binding is split by rows into chunks
// (kernels::weights); each chunk is its own dispatch and only writes the tokens whose id falls
// in [row0, row0 + n_rows). One invocation decodes 8 consecutive values via the weight
// format's `w_load8` (prepended: weights_<format>.wgsl), so the table stays quantized.

struct Params {
    k: u32,      // n_embd: values per row
    n_rows: u32, // rows in this chunk
    row0: u32,   // id of this chunk's first row
    scale: f32,  // every value is multiplied by it (gemma: sqrt(n_embd); else 1)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> tokens: array<u32>;    // [n_ctx] token id per position
@group(0) @binding(3) var<storage, read> w: array<u32>;         // [n_rows, k] in the format's GPU layout
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // [n_tokens, k]

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(workgroup_id) wg: vec3<u32>) {
    let u = gid.x;
    let t = wg.y;
    if u >= (p.k + 7u) / 8u || t >= state.n_tokens {
        return;
    }
    let id = tokens[state.pos + t];
    if id < p.row0 || id - p.row0 >= p.n_rows {
        return; // another chunk's row
    }
    let v = w_load8(id - p.row0, u, p.k);
    let vals = array<f32, 8>(v.a.x, v.a.y, v.a.z, v.a.w, v.b.x, v.b.y, v.b.z, v.b.w);
    let base = t * p.k;
    for (var j = 0u; j < 8u; j++) {
        let c = 8u * u + j;
        if c < p.k {
            out[base + c] = vals[j] * p.scale;
        }
    }
}
