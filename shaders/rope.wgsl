// Rotary position embedding of Q and K, in place, llama.cpp's two pairings:
//   normal (llama):  rotates (x[2i], x[2i+1])
//   NeoX (qwen2...): rotates (x[i],  x[i + n_rot/2])
// for pair i < n_rot/2 by theta = pos * freq_base^(-2i/n_rot) / factors[i] * freq_scale, with cos
// and sin times mscale (ggml's rope with YaRN's extrapolation off: Llama 3's and Phi-3's
// frequency factors, linear scaling, LongRoPE's attention factor; a model without them binds
// factors of 1 and freq_scale = mscale = 1, which change nothing); dims >= n_rot pass through.
//
// One invocation per (token, head, pair) over Q's and K's heads together, so both are rotated
// by one dispatch. pos = state.pos + t comes from the GPU state.
//
// Precision is made independent of the GPU (rope_math.wgsl): theta is computed exactly as ggml
// does in f32, and sin/cos are our own polynomials.

struct Params {
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    n_rot: u32,       // rotated dims per head (even, <= head_dim)
    theta_scale: f32, // freq_base^(-2 / n_rot)
    neox: u32,        // 0: normal adjacent pairs, 1: NeoX half split
    freq_scale: f32,  // 1 / linear scaling factor
    mscale: f32,      // multiplies cos and sin
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read_write> q: array<f32>; // [n_tokens, n_head, head_dim]
@group(0) @binding(3) var<storage, read_write> k: array<f32>; // [n_tokens, n_head_kv, head_dim]
@group(0) @binding(4) var<storage, read> factors: array<f32>; // [n_rot / 2]

const WG: u32 = 64u;
@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let g = linear_group(wg, nwg) * WG + lid;
    let half = p.n_rot / 2u;
    let per_token = (p.n_head + p.n_head_kv) * half;
    let t = g / per_token;
    if t >= state.n_tokens {
        return;
    }
    let h = (g % per_token) / half;
    let i = g % half;
    let sc = rope_sincos(rope_theta(state.pos + t, i, p.theta_scale), factors[i], p.freq_scale, p.mscale);
    let s = sc.x;
    let c = sc.y;
    let i0 = select(2u * i, i, p.neox != 0u);
    let i1 = select(2u * i + 1u, i + half, p.neox != 0u);
    if h < p.n_head {
        let b = (t * p.n_head + h) * p.head_dim;
        let x0 = q[b + i0];
        let x1 = q[b + i1];
        q[b + i0] = x0 * c - x1 * s;
        q[b + i1] = x0 * s + x1 * c;
    } else {
        let b = (t * p.n_head_kv + h - p.n_head) * p.head_dim;
        let x0 = k[b + i0];
        let x1 = k[b + i1];
        k[b + i0] = x0 * c - x1 * s;
        k[b + i1] = x0 * s + x1 * c;
    }
}
