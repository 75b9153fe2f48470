// Declarations shared by every fuselm kernel; prepended to each kernel's source by
// `kernels::compose` (WGSL has no #include, and pasting these into each file would let the
// copies drift).
//
// `State` mirrors `kernels::DecodeState` field for field. It lives in a small storage buffer
// that the GPU itself advances (argmax writes the next token, `advance` moves `pos`), so a whole
// generation can be encoded in one compute pass with no CPU writes between tokens.
struct State {
    pos: u32,      // position of the first token of this step = tokens already in the KV cache
    n_tokens: u32, // tokens in this step: the prompt length for prefill, 1 for decode
    done: u32,     // 1 once a stop token was chosen: every fused kernel then returns at once
    aux: u32,      // fused: the constraint's DFA state (constraint_mask.wgsl); megakernel: its error code
}

// Eight consecutive elements [8u, 8u + 8) of a weight row or an activation row, in f32.
// Weight formats (weights_*.wgsl) decode into this; kernels only ever see f32.
struct W8 {
    a: vec4<f32>,
    b: vec4<f32>,
}

fn dot8(w: W8, x: W8) -> f32 {
    return dot(w.a, x.a) + dot(w.b, x.b);
}

// The sum of the eight values (the `xs` of the weight formats' `w_dot8`).
fn sum8(x: W8) -> f32 {
    return dot(x.a + x.b, vec4<f32>(1.0));
}

// Four signed bytes of `v` (little-endian) as f32; arithmetic shifts sign-extend.
fn i8x4(v: u32) -> vec4<f32> {
    let s = bitcast<vec4<i32>>(vec4<u32>(v << 24u, v << 16u, v << 8u, v)) >> vec4<u32>(24u);
    return vec4<f32>(s);
}

// The four nibbles at bit `shift` of each byte of `v` (shift 0: low nibbles, 4: high nibbles).
fn nibbles4u(v: u32, shift: u32) -> vec4<u32> {
    let s = vec4<u32>(shift, shift + 8u, shift + 16u, shift + 24u);
    return (vec4<u32>(v) >> s) & vec4<u32>(0xfu);
}

// Written out rather than as vec4<f32>(nibbles4u(..)): with that call, SmolLM2's fused gate/up
// at 1k context went 10.5 -> 14.1 us per dispatch on an H200 (bench/NOTES.md, 2026-11-26).
fn nibbles4(v: u32, shift: u32) -> vec4<f32> {
    let s = vec4<u32>(shift, shift + 8u, shift + 16u, shift + 24u);
    return vec4<f32>((vec4<u32>(v) >> s) & vec4<u32>(0xfu));
}

// The 2-bit fields of `v` at bits shift, shift + 8, shift + 16, shift + 24 (one per byte).
fn crumbs4(v: u32, shift: u32) -> vec4<f32> {
    let s = vec4<u32>(shift, shift + 8u, shift + 16u, shift + 24u);
    return vec4<f32>((vec4<u32>(v) >> s) & vec4<u32>(3u));
}

// Integer fields are combined as integers and converted once (one conversion per value, where
// converting each field and adding them as floats cost a conversion and an add per field).

// Four consecutive 2-bit fields of `v` from bit `first`.
fn crumbs4_packed_u(v: u32, first: u32) -> vec4<u32> {
    let s = vec4<u32>(first, first + 2u, first + 4u, first + 6u);
    return (vec4<u32>(v) >> s) & vec4<u32>(3u);
}

// Bits first..first+3 of `v`, each as 0 or 1.
fn bits4u(v: u32, first: u32) -> vec4<u32> {
    let s = vec4<u32>(first, first + 1u, first + 2u, first + 3u);
    return (vec4<u32>(v) >> s) & vec4<u32>(1u);
}

// Bits first..first+3 of `v`, each as 0 or 16 (the fifth bit of a 5-bit quant).
fn fifth_bits4u(v: u32, first: u32) -> vec4<u32> {
    return bits4u(v, first) << vec4<u32>(4u);
}

// Linear workgroup index of a 1D grid that Rust folded into x/y when it exceeded
// maxComputeWorkgroupsPerDimension (see `kernels::grid`).
fn linear_group(wg: vec3<u32>, nwg: vec3<u32>) -> u32 {
    return wg.x + wg.y * nwg.x;
}

// The gate activations of a gated FFN: SiLU (SwiGLU: llama, qwen) and GELU's tanh
// approximation (GeGLU: gemma). tanh's argument is clamped: tanh(15) is 1 in f32, and a tanh
// computed from exp would overflow to inf / inf beyond ~44.
fn silu(g: f32) -> f32 {
    return g / (1.0 + exp(-g));
}

fn gelu_tanh(g: f32) -> f32 {
    return 0.5 * g * (1.0 + tanh(clamp(0.7978846 * g * (1.0 + 0.044715 * g * g), -15.0, 15.0)));
}
