//! Reference quantizers (f32 -> Q8_0 / Q4_0 / Q4_1 bytes), ported from ggml's
//! `quantize_row_*_ref`, to build test files and the synthetic model. They reproduce ggml's
//! rounding (roundf / truncating int8 casts, scale rounded to f16 only when stored), so the
//! bytes match what `llama-quantize` would write for the same input.
//!
//! Input lengths that are not a multiple of 32 are zero-padded up to a whole block.

use super::f16::f32_to_f16;

const QK: usize = 32;

fn blocks(x: &[f32]) -> impl Iterator<Item = [f32; QK]> + '_ {
    x.chunks(QK).map(|c| {
        let mut b = [0.0f32; QK];
        b[..c.len()].copy_from_slice(c);
        b
    })
}

/// ggml `quantize_row_q8_0_ref`: d = max|x| / 127, q = round(x / d).
pub fn quantize_q8_0(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(QK) * 34);
    for b in blocks(x) {
        let amax = b.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend(b.iter().map(|v| (v * id).round() as i8 as u8));
    }
    out
}

/// ggml `quantize_row_q4_0_ref`: d = (signed value of max magnitude) / -8,
/// q = min(15, trunc(x / d + 8.5)).
pub fn quantize_q4_0(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(QK) * 18);
    for b in blocks(x) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in &b {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -8.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        for j in 0..QK / 2 {
            let lo = ((b[j] * id + 8.5) as i8).min(15) as u8;
            let hi = ((b[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
            out.push(lo | (hi << 4));
        }
    }
    out
}

/// ggml `quantize_row_q4_1_ref`: d = (max - min) / 15, m = min,
/// q = min(15, trunc((x - min) / d + 0.5)).
pub fn quantize_q4_1(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(QK) * 20);
    for b in blocks(x) {
        let (mut min, mut max) = (f32::MAX, -f32::MAX);
        for &v in &b {
            min = if v < min { v } else { min };
            max = if v > max { v } else { max };
        }
        let d = (max - min) / 15.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend_from_slice(&f32_to_f16(min).to_le_bytes());
        for j in 0..QK / 2 {
            let lo = (((b[j] - min) * id + 0.5) as i8).min(15) as u8;
            let hi = (((b[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
            out.push(lo | (hi << 4));
        }
    }
    out
}
