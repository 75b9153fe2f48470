// The prefill matrix products' parameters and bindings (matmul.wgsl, matmul_wide.wgsl,
// matmul_coop.wgsl, composed after this file) and their activation loads.

struct Params {
    k: u32,      // values per row (input length)
    n_rows: u32, // rows in this weight chunk
    row0: u32,   // column in Y of this chunk's first row
    n: u32,      // row stride of Y (all rows of the weight)
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> w: array<u32>;       // [n_rows, k] in the format's GPU layout
@group(0) @binding(3) var<storage, read> x: array<f32>;       // [n_tokens, k]
@group(0) @binding(4) var<storage, read_write> y: array<f32>; // [n_tokens, n]

// X[t][c .. c + 4], zero past k and for tokens past n_tokens.
fn x_quad(t: u32, c: u32, n_tokens: u32) -> vec4<f32> {
    var v = vec4<f32>();
    if t < n_tokens {
        let b = t * p.k + c;
        if c + 4u <= p.k {
            v = vec4<f32>(x[b], x[b + 1u], x[b + 2u], x[b + 3u]);
        } else {
            for (var e = 0u; e < 4u; e++) {
                if c + e < p.k {
                    v[e] = x[b + e];
                }
            }
        }
    }
    return v;
}
