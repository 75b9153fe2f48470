// Weight decoder, F16: rows of k IEEE half values packed two per u32 (element i in the low
// half of word i/2 when i is even), exactly ggml's bytes. Decoded with the core builtin
// `unpack2x16float`, so this needs no shader-f16. When k is a multiple of 8 a unit is four
// aligned words; otherwise (odd k: rows start mid-word) each element is fetched on its own.

fn w_f16(i: u32, end: u32) -> f32 {
    let h = unpack2x16float(w[i >> 1u]);
    return select(0.0, select(h.x, h.y, (i & 1u) == 1u), i < end);
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    let c = 8u * u;
    let i = row * k + c;
    if (k & 7u) == 0u {
        let j = i >> 1u;
        let p = unpack2x16float(w[j]);
        let q = unpack2x16float(w[j + 1u]);
        let r = unpack2x16float(w[j + 2u]);
        let s = unpack2x16float(w[j + 3u]);
        return W8(vec4<f32>(p, q), vec4<f32>(r, s));
    }
    let end = row * k + k;
    return W8(
        vec4<f32>(w_f16(i, end), w_f16(i + 1u, end), w_f16(i + 2u, end), w_f16(i + 3u, end)),
        vec4<f32>(w_f16(i + 4u, end), w_f16(i + 5u, end), w_f16(i + 6u, end), w_f16(i + 7u, end)),
    );
}
