// RMS norm (llama.cpp's rms_norm followed by the elementwise weight):
//   out[r][i] = x[r][i] / sqrt(mean(x[r]^2) + eps) * weight[i]
//
// One workgroup per row: the row is only n_embd (hundreds to a few thousand) values, so a
// 64-wide strided sum and a shared-memory tree reduction beat anything fancier and need no
// subgroups. `last_only` normalises just the last token of the step (row state.n_tokens - 1,
// written as row 0): after prefill only that row feeds the output head, and its index is on
// the GPU, so the kernel picks it rather than a CPU-side buffer offset. With rows_per_token > 1
// each token's values are that many rows (per-head Q/K norms: n = head_dim, one row per head).

struct Params {
    n: u32,         // values per row (n_embd)
    eps: f32,
    last_only: u32, // 1: one workgroup, reads row state.n_tokens - 1, writes row 0
    rows_per_token: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> x: array<f32>;         // [n_tokens, n]
@group(0) @binding(3) var<storage, read> weight: array<f32>;    // [n]
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // [n_tokens, n], or [1, n] if last_only

const WG: u32 = 64u;
var<workgroup> red: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let n_tokens = state.n_tokens;
    let last = p.last_only != 0u;
    let row_in = select(wg.x, max(n_tokens, 1u) - 1u, last);
    let row_out = select(wg.x, 0u, last);
    let src = row_in * p.n;
    var acc = 0.0;
    for (var i = lid; i < p.n; i += WG) {
        let v = x[src + i];
        acc += v * v;
    }
    red[lid] = acc;
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid < s {
            red[lid] += red[lid + s];
        }
    }
    workgroupBarrier();
    let scale = inverseSqrt(red[0] / f32(p.n) + p.eps);
    if row_in >= n_tokens * p.rows_per_token {
        return;
    }
    let dst = row_out * p.n;
    for (var i = lid; i < p.n; i += WG) {
        out[dst + i] = x[src + i] * scale * weight[i];
    }
}
