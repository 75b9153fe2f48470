// Weight decoder, Q8_0 repacked (kernels::weights): 36-byte blocks = 9 u32 words per 32
// values. Word 0: the f16 scale d in its low half (high half zero, the 2 padding bytes that
// make ggml's 34-byte block 4-byte aligned); words 1..8: the 32 int8 quants, little-endian.
// value = q * d. k is a multiple of 32, so a unit (8 values) never straddles a block.

const Q8_0_WORDS: u32 = 9u;

// The words unit u needs: (scale word, quant word, next quant word, 0).
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    let base = (row * (k / 32u) + u / 4u) * Q8_0_WORDS;
    let q = base + 1u + 2u * (u % 4u);
    return vec4<u32>(w[base], w[q], w[q + 1u], 0u);
}

// Unit u's eight signed 8-bit quants as f32: the weight is d * q.
fn w_quants(raw: vec4<u32>, u: u32) -> W8 {
    return W8(i8x4(raw.y), i8x4(raw.z));
}

fn w_decode(raw: vec4<u32>, row: u32, u: u32, k: u32) -> W8 {
    let d = unpack2x16float(raw.x).x;
    let q = w_quants(raw, u);
    return W8(q.a * d, q.b * d);
}

// dot(unit u's 8 weights, x) given xs = the sum of x's 8 values: the unit's scale (and offset)
// applied once to the dot product of its integer quants instead of to each weight.
fn w_dot8(raw: vec4<u32>, row: u32, u: u32, k: u32, x: W8, xs: f32) -> f32 {
    return unpack2x16float(raw.x).x * dot8(w_quants(raw, u), x);
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(w_fetch(row, u, k), row, u, k);
}
