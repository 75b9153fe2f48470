// Weight decoder, Q3_K repacked (kernels::weights): ggml's 110-byte superblock becomes 116
// bytes = 29 u32 words per 256 values. Word 0: f16 d (low half), 0; words 1..4: the 16 6-bit
// scales unpacked to bytes (stored + 32, as in ggml); words 5..20: unit s's eight 2-bit low
// parts in half s % 2 of word 5 + s / 2 (value 8s + i at bits 2i); words 21..28: unit s's
// eight high bits in byte s % 4 of word 21 + s / 4 (value 8s + i at bit i).
// value = (d * (scale - 32)) * (low - (high ? 0 : 4)), as ggml's dequantize_row_q3_K; unit s
// uses scale s / 2.

const Q3_K_WORDS: u32 = 29u;

// The words unit u needs: (d word, its scale word, its low-bits word, its high-bits word).
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    let base = (row * (k / 256u) + u / 32u) * Q3_K_WORDS;
    let s = u % 32u;
    return vec4<u32>(w[base], w[base + 1u + s / 8u], w[base + 5u + s / 2u], w[base + 21u + s / 4u]);
}

// Unit u's eight 3-bit quants q (0..7) as f32, and its scale: the weight is scale * (q - 4).
fn w_quants(raw: vec4<u32>, u: u32) -> W8 {
    let s = u % 32u;
    let lows = raw.z >> (16u * (s % 2u));
    let highs = raw.w >> (8u * (s % 4u));
    return W8(
        vec4<f32>(crumbs4_packed_u(lows, 0u) | (bits4u(highs, 0u) << vec4<u32>(2u))),
        vec4<f32>(crumbs4_packed_u(lows, 8u) | (bits4u(highs, 4u) << vec4<u32>(2u))),
    );
}

fn w_scale(raw: vec4<u32>, u: u32) -> f32 {
    let sc = (raw.y >> (8u * (((u % 32u) / 2u) % 4u))) & 0xffu;
    return unpack2x16float(raw.x).x * f32(i32(sc) - 32);
}

fn w_decode(raw: vec4<u32>, row: u32, u: u32, k: u32) -> W8 {
    let q = w_quants(raw, u);
    let dl = w_scale(raw, u);
    return W8((q.a - 4.0) * dl, (q.b - 4.0) * dl);
}

// dot(unit u's 8 weights, x) given xs = the sum of x's 8 values: the unit's scale (and offset)
// applied once to the dot product of its integer quants instead of to each weight.
fn w_dot8(raw: vec4<u32>, row: u32, u: u32, k: u32, x: W8, xs: f32) -> f32 {
    return w_scale(raw, u) * (dot8(w_quants(raw, u), x) - 4.0 * xs);
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(w_fetch(row, u, k), row, u, k);
}
