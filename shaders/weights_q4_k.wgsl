// Weight decoder, Q4_K repacked (kernels::weights): 148-byte superblocks = 37 u32 words per
// 256 values. Word 0: f16 d (low half) and f16 dmin (high half), as in ggml; words 1..4: the
// eight 6-bit (scale, min) pairs of ggml's 12 packed bytes, unpacked at load to one byte each
// (pair j in half j % 2 of word 1 + j / 2: scale in its low byte, min in its high byte);
// words 5..36: ggml's 128 quant bytes unchanged. Each 64-value chunk c uses 32 quant bytes:
// sub-block 2c is their low nibbles, sub-block 2c + 1 their high nibbles.
// value = (d * scale) * q - dmin * min, as ggml's dequantize_row_q4_K.
//
// Unit s of a superblock (values 8s..8s+7; chunk c = s / 8, t = s % 8) reads quant words
// 5 + 8c + 2(t % 4) and the next one: low nibbles of sub-block 2c for t < 4, high nibbles of
// sub-block 2c + 1 otherwise.

const Q4_K_WORDS: u32 = 37u;

// The words unit u needs: (d/dmin word, its (scale, min) word, quant word, next quant word).
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    let base = (row * (k / 256u) + u / 32u) * Q4_K_WORDS;
    let s = u % 32u;
    let j = 2u * (s / 8u) + (s % 8u) / 4u;
    let q = base + 5u + 8u * (s / 8u) + 2u * (s % 4u);
    return vec4<u32>(w[base], w[base + 1u + j / 2u], w[q], w[q + 1u]);
}

// Unit u's eight 4-bit quants as f32 (low nibbles of sub-block 2c, or high of 2c + 1), and its
// (scale, min) = (d * scale, dmin * min): the weight is q * scale - min.
fn w_quants(raw: vec4<u32>, u: u32) -> W8 {
    let shift = 4u * (((u % 32u) % 8u) / 4u);
    return W8(nibbles4(raw.z, shift), nibbles4(raw.w, shift));
}

fn w_scales(raw: vec4<u32>, u: u32) -> vec2<f32> {
    let dm = unpack2x16float(raw.x);
    let s = u % 32u;
    let j = 2u * (s / 8u) + (s % 8u) / 4u;
    let pair = raw.y >> (16u * (j % 2u));
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
