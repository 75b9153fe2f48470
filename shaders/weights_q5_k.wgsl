// Weight decoder, Q5_K repacked (kernels::weights): ggml's 176-byte superblock becomes 180
// bytes = 45 u32 words per 256 values, regrouped at load so that each 8-value unit's bits are
// together. Word 0: f16 d (low half) and f16 dmin (high half), as in ggml; words 1..4: the
// eight (scale, min) pairs unpacked to bytes, as in weights_q4_k.wgsl; words 5..36: unit s's
// eight low nibbles (value 8s + i in the low nibble of byte i for i < 4, in the high nibble of
// byte i - 4 otherwise); words 37..44: unit s's eight fifth bits
// in byte s % 4 of word 37 + s / 4 (value 8s + i at bit i of that byte).
// value = (d * scale) * q - dmin * min with q = low | fifth << 4, as ggml's
// dequantize_row_q5_K. Unit s lies in sub-block s / 4.

const Q5_K_WORDS: u32 = 45u;

// The words unit u needs: (d/dmin word, its (scale, min) word, its nibble word, its fifth-bit word).
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    let base = (row * (k / 256u) + u / 32u) * Q5_K_WORDS;
    let s = u % 32u;
    return vec4<u32>(w[base], w[base + 1u + s / 8u], w[base + 5u + s], w[base + 37u + s / 4u]);
}

// Unit u's eight 5-bit quants as f32, and its (scale, min) = (d * scale, dmin * min): the
// weight is q * scale - min.
fn w_quants(raw: vec4<u32>, u: u32) -> W8 {
    let fifth = 8u * ((u % 32u) % 4u);
    return W8(
        vec4<f32>(nibbles4u(raw.z, 0u) | fifth_bits4u(raw.w, fifth)),
        vec4<f32>(nibbles4u(raw.z, 4u) | fifth_bits4u(raw.w, fifth + 4u)),
    );
}

fn w_scales(raw: vec4<u32>, u: u32) -> vec2<f32> {
    let dm = unpack2x16float(raw.x);
    let pair = raw.y >> (16u * (((u % 32u) / 4u) % 2u));
    return vec2<f32>(dm.x * f32(pair & 0xffu), dm.y * f32((pair >> 8u) & 0xffu));
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
