//! The counter-based RNG of the sampler: a draw is a pure function of (seed, position), so the
//! same seed gives the same tokens on every strategy and adapter, with no RNG state to carry
//! between GPU steps. Mirrored by `pcg` / `uniform01` in shaders/sampler_params.wgsl.

/// PCG-RXS-M-XS 32-bit hash (wrapping arithmetic).
pub fn pcg(v: u32) -> u32 {
    let s = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let w = ((s >> ((s >> 28) + 4)) ^ s).wrapping_mul(277_803_737);
    (w >> 22) ^ w
}

/// A uniform draw in [0, 1) (24 bits) for the token at sequence `position`.
pub fn uniform(seed_lo: u32, seed_hi: u32, position: u32) -> f32 {
    (pcg(position ^ pcg(seed_lo ^ pcg(seed_hi))) >> 8) as f32 * (1.0 / 16_777_216.0)
}
