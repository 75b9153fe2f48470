// Weight decoder, Q4_1: ggml's 20-byte block is already 4-byte aligned, so it is used as-is:
// 5 u32 words per 32 values. Word 0: f16 scale d (low half) and f16 min m (high half);
// words 1..4: 16 quant bytes, element j < 16 in the low nibble of byte j and element j + 16 in
// its high nibble. value = q * d + m. Units as in weights_q4_0.wgsl.

const Q4_1_WORDS: u32 = 5u;

// The words unit u needs: (d/m word, quant word, next quant word, 0).
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    let base = (row * (k / 32u) + u / 4u) * Q4_1_WORDS;
    let q = base + 1u + 2u * ((u % 4u) & 1u);
    return vec4<u32>(w[base], w[q], w[q + 1u], 0u);
}

// Unit u's eight 4-bit quants q as f32: the weight is d * q + m.
fn w_quants(raw: vec4<u32>, u: u32) -> W8 {
    let shift = 4u * ((u % 4u) >> 1u);
    return W8(nibbles4(raw.y, shift), nibbles4(raw.z, shift));
}

fn w_decode(raw: vec4<u32>, row: u32, u: u32, k: u32) -> W8 {
    let dm = unpack2x16float(raw.x);
    let q = w_quants(raw, u);
    return W8(q.a * dm.x + dm.y, q.b * dm.x + dm.y);
}

// dot(unit u's 8 weights, x) given xs = the sum of x's 8 values: the unit's scale (and offset)
// applied once to the dot product of its integer quants instead of to each weight.
fn w_dot8(raw: vec4<u32>, row: u32, u: u32, k: u32, x: W8, xs: f32) -> f32 {
    let dm = unpack2x16float(raw.x);
    return dm.x * dot8(w_quants(raw, u), x) + dm.y * xs;
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(w_fetch(row, u, k), row, u, k);
}
