// Weight decoder, F32: rows of k f32 values stored as-is (bit patterns in `w: array<u32>`).
// Every weight decoder defines `w_load8(row, u, k)`: elements [8u, 8u + 8) of row `row`, zero
// past k; and its two halves `w_fetch` (the raw words, so kernels can issue every weight load
// of a thread before other work) and `w_decode(raw, row, u, k)`. Kernels declare `w` and call only this, so one kernel file serves every format.

fn w_f32(i: u32, end: u32) -> f32 {
    return select(0.0, bitcast<f32>(w[i]), i < end);
}

// F32 units are 8 words: no prefetch into a vec4; w_decode reads them itself.
fn w_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {
    return vec4<u32>();
}

// dot(unit u's 8 weights, x); `xs` (the sum of x's values) is for the quantized formats.
fn w_dot8(raw: vec4<u32>, row: u32, u: u32, k: u32, x: W8, xs: f32) -> f32 {
    return dot8(w_decode(raw, row, u, k), x);
}

fn w_load8(row: u32, u: u32, k: u32) -> W8 {
    return w_decode(vec4<u32>(), row, u, k);
}

fn w_decode(raw: vec4<u32>, row: u32, u: u32, k: u32) -> W8 {
    let c = 8u * u;
    let i = row * k + c;
    if c + 8u <= k {
        return W8(
            bitcast<vec4<f32>>(vec4<u32>(w[i], w[i + 1u], w[i + 2u], w[i + 3u])),
            bitcast<vec4<f32>>(vec4<u32>(w[i + 4u], w[i + 5u], w[i + 6u], w[i + 7u])),
        );
    }
    let end = row * k + k; // ragged tail of the row
    return W8(
        vec4<f32>(w_f32(i, end), w_f32(i + 1u, end), w_f32(i + 2u, end), w_f32(i + 3u, end)),
        vec4<f32>(w_f32(i + 4u, end), w_f32(i + 5u, end), w_f32(i + 6u, end), w_f32(i + 7u, end)),
    );
}
