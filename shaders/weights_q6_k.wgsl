// Weight decoder, Q6_K repacked (kernels::weights): ggml's 210-byte superblock (not 4-byte
// aligned) becomes 212 bytes = 53 u32 words per 256 values, regrouped at load so that each
// 8-value unit's bits are together. Word 0: f16 d (low half), 0; words 1..4: ggml's 16 int8
// scales unchanged (scale i covers values 16i..16i+15); words 5..36: unit s's eight low
// nibbles (value 8s + i in bits 4i..4i+3); words 37..52: unit s's eight 2-bit high parts in
// half s % 2 of word 37 + s / 2 (value 8s + i at bits 2i..2i+1 of that half).
// value = (d * scale) * (q - 32) with q = low | high << 4, as ggml's dequantize_row_q6_K.

const Q6_K_WORDS: u32 = 53u;

// The words unit u needs: (d word, its scale word, its low-nibble word, its high-bits word).
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    let base = (row * (k / 256u) + u / 32u) * Q6_K_WORDS;
    let s = u % 32u;
    return vec4<u32>(w[base], w[base + 1u + s / 8u], w[base + 5u + s], w[base + 37u + s / 2u]);
}

// Unit u's eight 6-bit quants q (0..63; the weight is (d * scale) * (q - 32)), as f32.
fn w_quants(raw: vec4<u32>, u: u32) -> W8 {
    let hi = raw.w >> (16u * ((u % 32u) % 2u));
    let lo_a = (vec4<u32>(raw.z) >> vec4<u32>(0u, 4u, 8u, 12u)) & vec4<u32>(0xfu);
    let lo_b = (vec4<u32>(raw.z) >> vec4<u32>(16u, 20u, 24u, 28u)) & vec4<u32>(0xfu);
    let hi_a = (vec4<u32>(hi) >> vec4<u32>(0u, 2u, 4u, 6u)) & vec4<u32>(3u);
    let hi_b = (vec4<u32>(hi) >> vec4<u32>(8u, 10u, 12u, 14u)) & vec4<u32>(3u);
    return W8(vec4<f32>(lo_a | (hi_a << vec4<u32>(4u))), vec4<f32>(lo_b | (hi_b << vec4<u32>(4u))));
}

// Unit u's d * scale.
fn w_scale(raw: vec4<u32>, u: u32) -> f32 {
    let d = unpack2x16float(raw.x).x;
    return d * f32(extractBits(bitcast<i32>(raw.y), 8u * (((u % 32u) / 2u) % 4u), 8u));
}

fn w_decode(raw: vec4<u32>, row: u32, u: u32, k: u32) -> W8 {
    let ds = w_scale(raw, u);
    let q = w_quants(raw, u);
    return W8(ds * (q.a - 32.0), ds * (q.b - 32.0));
}

// dot(unit u's 8 weights, x) given xs = the sum of x's 8 values: the unit's scale (and offset)
// applied once to the dot product of its integer quants instead of to each weight.
fn w_dot8(raw: vec4<u32>, row: u32, u: u32, k: u32, x: W8, xs: f32) -> f32 {
    return w_scale(raw, u) * (dot8(w_quants(raw, u), x) - 32.0 * xs);
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(w_fetch(row, u, k), row, u, k);
}
