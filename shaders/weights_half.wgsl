// Weight decoder body shared by the 16-bit float formats (appended to weights_f16.wgsl or
// weights_bf16.wgsl, which define `w_pair`: the two values of one u32 word, element i in the
// low half when i is even): rows of k values packed two per word, exactly ggml's bytes. When k
// is a multiple of 8 a unit is four aligned words; otherwise (odd k: rows start mid-word) each
// element is fetched on its own.

fn w_half(i: u32, end: u32) -> f32 {
    let h = w_pair(w[i >> 1u]);
    return select(0.0, select(h.x, h.y, (i & 1u) == 1u), i < end);
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
            vec4<f32>(w_pair(raw.x), w_pair(raw.y)),
            vec4<f32>(w_pair(raw.z), w_pair(raw.w)),
        );
    }
    let i = row * k + 8u * u;
    let end = row * k + k;
    return W8(
        vec4<f32>(w_half(i, end), w_half(i + 1u, end), w_half(i + 2u, end), w_half(i + 3u, end)),
        vec4<f32>(w_half(i + 4u, end), w_half(i + 5u, end), w_half(i + 6u, end), w_half(i + 7u, end)),
    );
}

// dot(unit u's 8 weights, x); `xs` (the sum of x's values) is for the quantized formats.
fn w_dot8(raw: vec4<u32>, row: u32, u: u32, k: u32, x: W8, xs: f32) -> f32 {
    return dot8(w_decode(raw, row, u, k), x);
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(w_fetch(row, u, k), row, u, k);
}
