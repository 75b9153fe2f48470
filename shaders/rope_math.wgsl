// RoPE angle helpers shared by rope.wgsl (prefill) and fused_qkv.wgsl (decode), prepended by
// the kernels that rotate. theta follows ggml's f32 order of roundings (pos times theta_scale,
// pair by pair), and sin/cos are our own polynomials: WGSL only bounds builtin sin/cos to
// 2^-11 absolute error on [-pi, pi] and theta reaches thousands of radians.

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

// theta of rotation pair i at position pos: pos * theta_scale^i, multiplied out as ggml does.
fn rope_theta(pos: u32, i: u32, theta_scale: f32) -> f32 {
    var theta = f32(pos);
    for (var j = 0u; j < i; j++) {
        theta *= theta_scale;
    }
    return theta;
}

// (sin, cos) of pair i at angle theta (`rope_theta`) with RoPE's extensions, as ggml's rope_yarn
// with YaRN's extrapolation off: theta / factor * freq_scale (frequency factors of Llama 3 and
// Phi-3's LongRoPE; 1 / linear scaling), both times mscale (LongRoPE's attention factor). With
// factor, freq_scale and mscale 1 every step is exact: plain RoPE.
fn rope_sincos(theta: f32, factor: f32, freq_scale: f32, mscale: f32) -> vec2<f32> {
    return sincos(theta / factor * freq_scale) * mscale;
}
