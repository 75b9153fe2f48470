// Weight decoder, Q5_0 repacked (kernels::weights): 24-byte blocks = 6 u32 words per 32
// values. Word 0: the f16 scale d in its low half (2 zero padding bytes make ggml's 22-byte
// block 4-byte aligned); word 1: ggml's qh, the fifth bit of element j at bit j; words 2..5:
// 16 quant bytes, nibbles as in weights_q4_0.wgsl. value = ((q | fifth << 4) - 16) * d, as
// ggml's dequantize_row_q5_0.
//
// Unit s of a block (values 8s..8s+7) reads words 2 + 2(s & 1) and the next one, low nibbles
// for s < 2 and high nibbles for s >= 2, and byte s of qh.

const Q5_0_WORDS: u32 = 6u;

// The words unit u needs: (scale word, qh, quant word, next quant word).
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    let base = (row * (k / 32u) + u / 4u) * Q5_0_WORDS;
    let q = base + 2u + 2u * ((u % 4u) & 1u);
    return vec4<u32>(w[base], w[base + 1u], w[q], w[q + 1u]);
}

// Unit u's eight 5-bit quants q as f32: the weight is d * (q - 16).
fn w_quants(raw: vec4<u32>, u: u32) -> W8 {
    let s = u % 4u;
    let shift = 4u * (s >> 1u);
    return W8(
        vec4<f32>(nibbles4u(raw.z, shift) | fifth_bits4u(raw.y, 8u * s)),
        vec4<f32>(nibbles4u(raw.w, shift) | fifth_bits4u(raw.y, 8u * s + 4u)),
    );
}

fn w_decode(raw: vec4<u32>, row: u32, u: u32, k: u32) -> W8 {
    let d = unpack2x16float(raw.x).x;
    let q = w_quants(raw, u);
    return W8((q.a - 16.0) * d, (q.b - 16.0) * d);
}

// dot(unit u's 8 weights, x) given xs = the sum of x's 8 values: the unit's scale (and offset)
// applied once to the dot product of its integer quants instead of to each weight.
fn w_dot8(raw: vec4<u32>, row: u32, u: u32, k: u32, x: W8, xs: f32) -> f32 {
    return unpack2x16float(raw.x).x * (dot8(w_quants(raw, u), x) - 16.0 * xs);
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(w_fetch(row, u, k), row, u, k);
}
