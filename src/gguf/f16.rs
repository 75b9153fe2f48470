//! IEEE half and bfloat16 <-> f32 conversions, bit-exact, without the `half` crate.
//!
//! f16 -> f32 is exact. f32 -> f16 rounds to nearest, ties to even, like ggml's
//! `GGML_FP32_TO_FP16` (F16C `vcvtps2ph` and the scalar fallback agree) and numpy's
//! `astype(float16)`, so quantizers built on it produce ggml's bytes.

/// Converts IEEE binary16 bits to f32 (exact; NaN payloads are preserved).
pub fn f16_to_f32(h: u16) -> f32 {
    let sign = u32::from(h & 0x8000) << 16;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // Subnormal: man * 2^-24, exact in f32.
            let v = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        31 => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

/// Converts f32 to IEEE binary16 bits, round to nearest even; overflow gives infinity.
pub fn f32_to_f16(f: f32) -> u16 {
    let x = f.to_bits();
    let sign = ((x >> 16) & 0x8000) as u16;
    let exp = ((x >> 23) & 0xff) as i32;
    let man = x & 0x007f_ffff;
    if exp == 0xff {
        // Inf stays inf; NaN stays a quiet NaN.
        return sign
            | 0x7c00
            | if man != 0 {
                0x0200 | (man >> 13) as u16
            } else {
                0
            };
    }
    let e = exp - 127 + 15;
    if e >= 31 {
        return sign | 0x7c00;
    }
    if e <= 0 {
        if e < -10 {
            return sign; // below half the smallest subnormal: rounds to zero
        }
        // Subnormal result r * 2^-24 with r = m24 * 2^(e - 14).
        let m = man | 0x0080_0000;
        let shift = (14 - e) as u32; // 14..=24
        let rem = m & ((1 << shift) - 1);
        let half = 1 << (shift - 1);
        let mut r = m >> shift;
        if rem > half || (rem == half && r & 1 == 1) {
            r += 1;
        }
        return sign | r as u16;
    }
    let mut r = ((e as u32) << 10) | (man >> 13);
    let rem = man & 0x1fff;
    if rem > 0x1000 || (rem == 0x1000 && r & 1 == 1) {
        r += 1; // a carry into the exponent is correct, up to and including infinity
    }
    sign | r as u16
}

/// Converts bfloat16 bits to f32 (exact: bf16 is the top half of an f32).
pub fn bf16_to_f32(b: u16) -> f32 {
    f32::from_bits(u32::from(b) << 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_roundtrip_every_value() {
        for h in 0..=u16::MAX {
            let f = f16_to_f32(h);
            if f.is_nan() {
                assert!(f16_to_f32(f32_to_f16(f)).is_nan());
            } else {
                assert_eq!(f32_to_f16(f), h, "h={h:#06x} f={f}");
            }
        }
    }

    #[test]
    fn f32_to_f16_rounding() {
        assert_eq!(f32_to_f16(1.0), 0x3c00);
        assert_eq!(f32_to_f16(65504.0), 0x7bff);
        assert_eq!(f32_to_f16(65520.0), 0x7c00); // ties to even -> overflow
        assert_eq!(f32_to_f16(1.0 + 1.0 / 2048.0), 0x3c00); // tie, even stays
        assert_eq!(f32_to_f16(1.0 + 3.0 / 2048.0), 0x3c02); // tie, odd rounds up
        assert_eq!(f32_to_f16(2.0f32.powi(-25)), 0x0000); // tie to even zero
        assert_eq!(f32_to_f16(2.0f32.powi(-25) * 1.5), 0x0001);
        assert_eq!(f32_to_f16(-2.0f32.powi(-24)), 0x8001);
        assert_eq!(f32_to_f16(f32::INFINITY), 0x7c00);
        assert_eq!(bf16_to_f32(0x3f80), 1.0);
    }
}
