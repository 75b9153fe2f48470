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

/// RoPE beyond the base frequency, as ggml's `rope_ext` with YaRN's extrapolation off
/// (`rope_yarn` with `ext_factor` 0): pair `i`'s angle is `theta_i / factors[i] * freq_scale`
/// and its cos and sin are multiplied by `mscale`.
#[derive(Debug, Clone, Copy)]
pub struct RopeScale<'a> {
    /// Frequency factors, `[n_rot / 2]` (Llama 3's `rope_freqs`, Phi-3's LongRoPE factors).
    pub factors: Option<&'a [f32]>,
    /// 1 / linear scaling factor.
    pub freq_scale: f32,
    /// The attention factor (LongRoPE).
    pub mscale: f32,
}

impl RopeScale<'_> {
    /// Plain RoPE.
    pub const NONE: RopeScale<'static> = RopeScale {
        factors: None,
        freq_scale: 1.0,
        mscale: 1.0,
    };
}

/// Rotates, in place, each of the `x.len() / head_dim` heads of one token at position `pos`:
/// pair `i < n_rot / 2` is `(2i, 2i + 1)` (normal, llama) or `(i, i + n_rot / 2)` (`neox`),
/// rotated by `rope_theta(pos)[i]`; dims `>= n_rot` are untouched.
pub fn rope(x: &mut [f32], head_dim: usize, n_rot: usize, pos: u32, freq_base: f32, neox: bool) {
    rope_scaled(x, head_dim, n_rot, pos, freq_base, neox, RopeScale::NONE);
}

/// [`rope`] with [`RopeScale`].
pub fn rope_scaled(
    x: &mut [f32],
    head_dim: usize,
    n_rot: usize,
    pos: u32,
    freq_base: f32,
    neox: bool,
    scale: RopeScale<'_>,
) {
    let mut theta = rope_theta(pos, n_rot, freq_base);
    for (i, t) in theta.iter_mut().enumerate() {
        let f = scale.factors.map_or(1.0, |f| f[i]);
        *t = *t / f * scale.freq_scale;
    }
    let half = n_rot / 2;
    for head in x.chunks_mut(head_dim) {
        for (i, t) in theta.iter().enumerate() {
            let (i0, i1) = if neox {
                (i, i + half)
            } else {
                (2 * i, 2 * i + 1)
            };
            let (c, s) = (t.cos() * scale.mscale, t.sin() * scale.mscale);
            let (x0, x1) = (head[i0], head[i1]);
            head[i0] = x0 * c - x1 * s;
            head[i1] = x0 * s + x1 * c;
        }
    }
}
