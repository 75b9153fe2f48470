//! Rotary position embedding, exactly llama.cpp's formulas (`ggml_rope_cache_init` and
//! `rotate_pairs` / the NeoX variant in ggml-cpu).

/// `theta_i = pos * freq_base^(-2i / n_rot)` for pair `i`, computed as ggml does: in f32,
/// starting from `pos` and multiplying by `theta_scale = freq_base^(-2 / n_rot)` per pair.
pub fn rope_theta(pos: u32, n_rot: usize, freq_base: f32) -> Vec<f32> {
    let theta_scale = freq_base.powf(-2.0 / n_rot as f32);
    let mut theta = pos as f32;
    (0..n_rot / 2)
        .map(|_| {
            let t = theta;
            theta *= theta_scale;
            t
        })
        .collect()
}

/// Rotates, in place, each of the `x.len() / head_dim` heads of one token at position `pos`:
/// pair `i < n_rot / 2` is `(2i, 2i + 1)` (normal, llama) or `(i, i + n_rot / 2)` (`neox`),
/// rotated by `rope_theta(pos)[i]`; dims `>= n_rot` are untouched.
pub fn rope(x: &mut [f32], head_dim: usize, n_rot: usize, pos: u32, freq_base: f32, neox: bool) {
    let theta = rope_theta(pos, n_rot, freq_base);
    let half = n_rot / 2;
    for head in x.chunks_mut(head_dim) {
        for (i, t) in theta.iter().enumerate() {
            let (i0, i1) = if neox {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (c, s) = (t.cos(), t.sin());
            let (x0, x1) = (head[i0], head[i1]);
            head[i0] = x0 * c - x1 * s;
            head[i1] = x0 * s + x1 * c;
        }
    }
}
