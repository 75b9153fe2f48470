// Weight decoder, BF16: rows of k bfloat16 values packed two per u32 (element i in the low
// half of word i/2 when i is even), exactly ggml's bytes. A bfloat16 is the top half of an f32,
// so decoding is a shift. Word-aligned units and ragged rows as in weights_f16.wgsl.

fn w_bf16_lo(v: u32) -> f32 {
    return bitcast<f32>(v << 16u);
}

fn w_bf16_hi(v: u32) -> f32 {
    return bitcast<f32>(v & 0xffff0000u);
}

fn w_bf16_pair(v: u32) -> vec2<f32> {
    return vec2<f32>(w_bf16_lo(v), w_bf16_hi(v));
}

fn w_bf16(i: u32, end: u32) -> f32 {
    let v = w[i >> 1u];
    return select(0.0, select(w_bf16_lo(v), w_bf16_hi(v), (i & 1u) == 1u), i < end);
}

// The four words of unit u when rows are word-aligned (k % 8 == 0); ragged rows are read
// element by element in w_decode instead.
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    if (k & 7u) != 0u {
        return vec4<u32>();
    }
    let j = (row * k + 8u * u) >> 1u;
    return vec4<u32>(w[j], w[j + 1u], w[j + 2u], w[j + 3u]);
}

fn w_decode(raw: vec4<u32>, row: u32, u: u32, k: u32) -> W8 {
    if (k & 7u) == 0u {
        return W8(
            vec4<f32>(w_bf16_pair(raw.x), w_bf16_pair(raw.y)),
            vec4<f32>(w_bf16_pair(raw.z), w_bf16_pair(raw.w)),
        );
    }
    let i = row * k + 8u * u;
    let end = row * k + k;
    return W8(
        vec4<f32>(w_bf16(i, end), w_bf16(i + 1u, end), w_bf16(i + 2u, end), w_bf16(i + 3u, end)),
        vec4<f32>(w_bf16(i + 4u, end), w_bf16(i + 5u, end), w_bf16(i + 6u, end), w_bf16(i + 7u, end)),
    );
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(w_fetch(row, u, k), row, u, k);
}
