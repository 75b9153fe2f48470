// Rotary position embedding of Q and K, in place, llama.cpp's two pairings:
//   normal (llama):  rotates (x[2i], x[2i+1])
//   NeoX (qwen2...): rotates (x[i],  x[i + n_rot/2])
// for pair i < n_rot/2 by theta = pos * freq_base^(-2i/n_rot); dims >= n_rot pass through.
//
// One invocation per (token, head, pair) over Q's and K's heads together, so both are rotated
// by one dispatch. pos = state.pos + t comes from the GPU state.
//
// Precision is made independent of the GPU: theta is computed exactly as ggml does in f32
// (start from pos, multiply by theta_scale = freq_base^(-2/n_rot), computed on the CPU, once
// per pair), so it is bit-identical to llama.cpp's; and sin/cos are our own polynomials after
// a two-part reduction by pi/2, because WGSL only bounds builtin sin/cos to 2^-11 absolute
// error on [-pi, pi] (SwiftShader's are ~3e-5 off) and theta reaches thousands of radians.

struct Params {
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    n_rot: u32,       // rotated dims per head (even, <= head_dim)
    theta_scale: f32, // freq_base^(-2 / n_rot)
    neox: u32,        // 0: normal adjacent pairs, 1: NeoX half split
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read_write> q: array<f32>; // [n_tokens, n_head, head_dim]
@group(0) @binding(3) var<storage, read_write> k: array<f32>; // [n_tokens, n_head_kv, head_dim]

const WG: u32 = 64u;
const TWO_OVER_PI: f32 = 0.63661977236758134;
const PI_2_HI: f32 = 1.5703125; // 201/128: n * PI_2_HI is exact for |n| < 2^16
const PI_2_LO: f32 = 4.8382679489661923e-4;

// (sin x, cos x) to ~1e-7 absolute for |x| < 1e5: reduce to r in [-pi/4, pi/4] and quadrant.
fn sincos(x: f32) -> vec2<f32> {
    let n = round(x * TWO_OVER_PI);
    let r = (x - n * PI_2_HI) - n * PI_2_LO;
    let r2 = r * r;
    let s = r * (1.0 + r2 * (-1.0 / 6.0 + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362880.0)))));
    let c = 1.0 + r2 * (-0.5 + r2 * (1.0 / 24.0 + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3628800.0)))));
    switch u32(i32(n) & 3) {
        case 0u: { return vec2<f32>(s, c); }
        case 1u: { return vec2<f32>(c, -s); }
        case 2u: { return vec2<f32>(-s, -c); }
        default: { return vec2<f32>(-c, s); }
    }
}

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
    var theta = f32(state.pos + t);
    for (var j = 0u; j < i; j++) {
        theta *= p.theta_scale; // ggml's order of roundings
    }
    let sc = sincos(theta);
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
