// Appends this step's K and V rows to the preallocated KV cache at positions
// state.pos + t (t < state.n_tokens). The cache is head-major, [n_head_kv, n_ctx, head_dim],
// so attention reads one head's keys as one contiguous run. Writes at positions >= n_ctx are
// dropped (the host checks capacity before recording; this only keeps the GPU in bounds).
// One invocation per value; a plain copy (rounded to f16 when `kv_t` is f16: kv_f16.wgsl),
// kept separate from rope for clarity (fusing the two is a later step).

struct Params {
    n_head_kv: u32,
    head_dim: u32,
    n_ctx: u32, // cache capacity in positions
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> k: array<f32>;             // [n_tokens, n_head_kv, head_dim]
@group(0) @binding(3) var<storage, read> v: array<f32>;             // [n_tokens, n_head_kv, head_dim]
@group(0) @binding(4) var<storage, read_write> k_cache: array<kv_t>; // [n_head_kv, n_ctx, head_dim]
@group(0) @binding(5) var<storage, read_write> v_cache: array<kv_t>; // [n_head_kv, n_ctx, head_dim]

const WG: u32 = 64u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = linear_group(wg, nwg) * WG + lid;
    let row = p.n_head_kv * p.head_dim;
    let t = g / row;
    let pos = state.pos + t;
    if t >= state.n_tokens || pos >= p.n_ctx {
        return;
    }
    let h = (g % row) / p.head_dim;
    let d = g % p.head_dim;
    let dst = (h * p.n_ctx + pos) * p.head_dim + d;
    k_cache[dst] = kv_t(k[g]);
    v_cache[dst] = kv_t(v[g]);
}
