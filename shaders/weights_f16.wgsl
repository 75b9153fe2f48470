// Weight decoder, F16: IEEE half values, decoded with the core builtin `unpack2x16float`, so
// this needs no shader-f16. The layout and the rest of the decoder: weights_half.wgsl
// (appended by `shaders::WEIGHTS_F16`).

fn w_pair(v: u32) -> vec2<f32> {
    return unpack2x16float(v);
}
