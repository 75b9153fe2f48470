// Weight decoder, BF16: a bfloat16 is the top half of an f32, so decoding is a shift. The
// layout and the rest of the decoder: weights_half.wgsl (appended by `shaders::WEIGHTS_BF16`).

fn w_pair(v: u32) -> vec2<f32> {
    return vec2<f32>(bitcast<f32>(v << 16u), bitcast<f32>(v & 0xffff0000u));
}
