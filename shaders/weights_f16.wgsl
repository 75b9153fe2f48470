// Weight decoder, F16: rows of k IEEE half values packed two per u32 (element i in the low
// half of word i/2 when i is even), exactly ggml's bytes. Decoded with the core builtin
// `unpack2x16float`, so this needs no shader-f16. When k is a multiple of 8 a unit is four
// aligned words; otherwise (odd k: rows start mid-word) each element is fetched on its own.

fn w_f16(i: u32, end: u32) -> f32 {
    let h = unpack2x16float(w[i >> 1u]);
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
            vec4<f32>(unpack2x16float(raw.x), unpack2x16float(raw.y)),
            vec4<f32>(unpack2x16float(raw.z), unpack2x16float(raw.w)),
        );
    }
    let i = row * k + 8u * u;
    let end = row * k + k;
    return W8(
        vec4<f32>(w_f16(i, end), w_f16(i + 1u, end), w_f16(i + 2u, end), w_f16(i + 3u, end)),
        vec4<f32>(w_f16(i + 4u, end), w_f16(i + 5u, end), w_f16(i + 6u, end), w_f16(i + 7u, end)),
    );
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(w_fetch(row, u, k), row, u, k);
}
