// Weight decoder, Q2_K as stored by ggml (kernels::weights): 84-byte superblocks = 21 u32
// words per 256 values. Words 0..3: 16 scale bytes, sub-block i's 4-bit scale in the low nibble
// of byte i and its 4-bit min in the high nibble; words 4..19: 64 quant bytes; word 20: f16 d
// (low half), f16 dmin (high half). value = (d * scale) * q - dmin * min, as ggml's
// dequantize_row_q2_K.
//
// Value v = 128 h + 32 j + 16 sub + l of a superblock is bits 2j..2j+1 of quant byte
// 32 h + 16 sub + l and uses sub-block v / 16. Unit s (values 8s..8s+7) therefore reads the
// 8 bytes at 32 h + 16 sub + 8 (s % 2), with h = s / 16, j = (s % 16) / 4, sub = (s % 4) / 2,
// and scale byte s / 2.

const Q2_K_WORDS: u32 = 21u;

// The words unit u needs: (d/dmin word, its scale word, its two quant words).
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    let base = (row * (k / 256u) + u / 32u) * Q2_K_WORDS;
    let s = u % 32u;
    let q = base + 4u + 8u * (s / 16u) + 4u * ((s % 4u) / 2u) + 2u * (s % 2u);
    return vec4<u32>(w[base + 20u], w[base + s / 8u], w[q], w[q + 1u]);
}

// Unit u's eight 2-bit quants as f32, and its (scale, min): the weight is q * scale - min.
fn w_quants(raw: vec4<u32>, u: u32) -> W8 {
    let shift = 2u * (((u % 32u) % 16u) / 4u);
    return W8(crumbs4(raw.z, shift), crumbs4(raw.w, shift));
}

fn w_scales(raw: vec4<u32>, u: u32) -> vec2<f32> {
    let dm = unpack2x16float(raw.x);
    let sc = (raw.y >> (8u * (((u % 32u) / 2u) % 4u))) & 0xffu;
    return vec2<f32>(dm.x * f32(sc & 0xfu), dm.y * f32(sc >> 4u));
}

fn w_decode(raw: vec4<u32>, row: u32, u: u32, k: u32) -> W8 {
    let q = w_quants(raw, u);
    let s = w_scales(raw, u);
    return W8(q.a * s.x - s.y, q.b * s.x - s.y);
}

// dot(unit u's 8 weights, x) given xs = the sum of x's 8 values: the unit's scale (and offset)
// applied once to the dot product of its integer quants instead of to each weight.
fn w_dot8(raw: vec4<u32>, row: u32, u: u32, k: u32, x: W8, xs: f32) -> f32 {
    let s = w_scales(raw, u);
    return s.x * dot8(w_quants(raw, u), x) - s.y * xs;
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(w_fetch(row, u, k), row, u, k);
}
