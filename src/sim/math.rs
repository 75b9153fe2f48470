//! Arithmetic the CPU reference shares with the simulation kernels, op for op, so both sides
//! agree to rounding: sine and cosine by the polynomial of `shaders/rope_math.wgsl` (WGSL only
//! bounds its builtin sin/cos to 2^-11 absolute error), tanh from exp, and the counter-based
//! RNG of the sampler (`sampling::rng::pcg`).

use crate::sampling::rng::pcg;

// The f32 values of rope_math.wgsl's constants.
const TWO_OVER_PI: f32 = std::f32::consts::FRAC_2_PI;
const PI_2_HI: f32 = 1.570_312_5;
const PI_2_LO: f32 = 4.838_268e-4;
pub const PI: f32 = std::f32::consts::PI;

/// (sin x, cos x) to ~1e-7 absolute for |x| < 1e5 (`sincos` in rope_math.wgsl).
pub fn sincos(x: f32) -> (f32, f32) {
    let n = (x * TWO_OVER_PI).round_ties_even();
    let r = (x - n * PI_2_HI) - n * PI_2_LO;
    let r2 = r * r;
    let s = r
        * (1.0
            + r2 * (-1.0 / 6.0
                + r2 * (1.0 / 120.0 + r2 * (-1.0 / 5040.0 + r2 * (1.0 / 362_880.0)))));
    let c = 1.0
        + r2 * (-0.5
            + r2 * (1.0 / 24.0
                + r2 * (-1.0 / 720.0 + r2 * (1.0 / 40320.0 + r2 * (-1.0 / 3_628_800.0)))));
    match (n as i32) & 3 {
        0 => (s, c),
        1 => (c, -s),
        2 => (-s, -c),
        _ => (-c, s),
    }
}

pub fn sin(x: f32) -> f32 {
    sincos(x).0
}

pub fn cos(x: f32) -> f32 {
    sincos(x).1
}

/// tanh(x) = 1 - 2 / (exp(2x) + 1), its argument clamped to ±15 (where tanh is ±1 in f32).
pub fn tanh(x: f32) -> f32 {
    let e = (2.0 * x.clamp(-15.0, 15.0)).exp();
    1.0 - 2.0 / (e + 1.0)
}

/// A uniform draw in [0, 1) (24 bits), a pure function of (seed, member, slot).
pub fn uniform(seed: u32, member: u32, slot: u32) -> f32 {
    (pcg(slot ^ pcg(member ^ pcg(seed))) >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// A uniform draw in [lo, hi).
pub fn uniform_in(seed: u32, member: u32, slot: u32, lo: f32, hi: f32) -> f32 {
    lo + (hi - lo) * uniform(seed, member, slot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sincos_and_tanh_are_accurate() {
        for i in -2000..2000 {
            let x = i as f32 * 0.01;
            let (s, c) = sincos(x);
            assert!((s - (x as f64).sin() as f32).abs() < 2e-7, "sin {x}");
            assert!((c - (x as f64).cos() as f32).abs() < 2e-7, "cos {x}");
            assert!(
                (tanh(x) - (x as f64).tanh() as f32).abs() < 2e-7,
                "tanh {x}"
            );
        }
    }

    #[test]
    fn draws_are_uniform() {
        let n = 100_000;
        let mean: f64 = (0..n).map(|m| f64::from(uniform(7, m, 3))).sum::<f64>() / f64::from(n);
        assert!((mean - 0.5).abs() < 0.005, "{mean}");
        assert_ne!(uniform(7, 1, 3), uniform(8, 1, 3));
        assert_ne!(uniform(7, 1, 3), uniform(7, 2, 3));
        assert_ne!(uniform(7, 1, 3), uniform(7, 1, 4));
    }
}
