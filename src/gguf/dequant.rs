//! CPU reference dequantizers, block layouts as in ggml's `ggml-common.h` and the
//! `dequantize_row_*` functions of `ggml-quants.c`.
//!
//! These are the ground truth the GPU kernels are tested against, so they follow ggml's
//! order of f32 operations exactly (e.g. Q4_K computes `d * sc` first, then `* q - dmin * m`);
//! results are then bit-identical to ggml and to the `gguf` Python package.

use super::error::GgufError;
use super::f16::{bf16_to_f32, f16_to_f32};
use super::reader::TensorInfo;
use super::tensor_type::GgmlType;

fn f16_at(b: &[u8], i: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[i], b[i + 1]]))
}

/// Dequantizes `n_elements` values of type `ty` from `data`, which must hold exactly
/// that many elements.
pub fn dequantize(ty: GgmlType, data: &[u8], n_elements: usize) -> Result<Vec<f32>, GgufError> {
    // Validate before allocating: `n_elements` is bounded by `data.len()` once sizes agree.
    check_sizes(ty, data.len(), n_elements)?;
    let mut out = vec![0.0f32; n_elements];
    dequantize_row_into(ty, data, &mut out)?;
    Ok(out)
}

/// Dequantizes a whole tensor whose bytes came from [`super::Gguf::tensor_data`].
pub fn dequantize_tensor(t: &TensorInfo, data: &[u8]) -> Result<Vec<f32>, GgufError> {
    let n = usize::try_from(t.n_elements).map_err(|_| GgufError::DataSizeMismatch {
        ty: t.ggml_type().map_or("?", GgmlType::name),
        n_elements: t.n_elements,
        expected: t.size_bytes,
        found: data.len() as u64,
    })?;
    dequantize(t.ggml_type()?, data, n)
}

fn check_sizes(ty: GgmlType, data_len: usize, n_elements: usize) -> Result<(), GgufError> {
    let block_len = ty.block_len() as u64;
    let n = n_elements as u64;
    if n % block_len != 0 {
        return Err(GgufError::NotBlockMultiple {
            ty: ty.name(),
            n_elements: n,
            block_len,
        });
    }
    let expected = (n / block_len).checked_mul(ty.block_bytes() as u64);
    if expected != Some(data_len as u64) {
        return Err(GgufError::DataSizeMismatch {
            ty: ty.name(),
            n_elements: n,
            expected: expected.unwrap_or(u64::MAX),
            found: data_len as u64,
        });
    }
    Ok(())
}

/// Dequantizes `out.len()` elements from `data` into `out` (no allocation). `data` must
/// hold exactly `out.len()` elements; use it per row or per block range.
pub fn dequantize_row_into(ty: GgmlType, data: &[u8], out: &mut [f32]) -> Result<(), GgufError> {
    check_sizes(ty, data.len(), out.len())?;
    let blocks = data
        .chunks_exact(ty.block_bytes())
        .zip(out.chunks_exact_mut(ty.block_len()));
    match ty {
        GgmlType::F32 => {
            blocks.for_each(|(b, y)| y[0] = f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        }
        GgmlType::F16 => blocks.for_each(|(b, y)| y[0] = f16_at(b, 0)),
        GgmlType::BF16 => {
            blocks.for_each(|(b, y)| y[0] = bf16_to_f32(u16::from_le_bytes([b[0], b[1]])))
        }
        GgmlType::Q8_0 => blocks.for_each(|(b, y)| q8_0(b, y)),
        GgmlType::Q4_0 => blocks.for_each(|(b, y)| q4_0(b, y)),
        GgmlType::Q4_1 => blocks.for_each(|(b, y)| q4_1(b, y)),
        GgmlType::Q5_0 => blocks.for_each(|(b, y)| q5_0(b, y)),
        GgmlType::Q5_1 => blocks.for_each(|(b, y)| q5_1(b, y)),
        GgmlType::Q2_K => blocks.for_each(|(b, y)| q2_k(b, y)),
        GgmlType::Q3_K => blocks.for_each(|(b, y)| q3_k(b, y)),
        GgmlType::Q4_K => blocks.for_each(|(b, y)| q4_k(b, y)),
        GgmlType::Q5_K => blocks.for_each(|(b, y)| q5_k(b, y)),
        GgmlType::Q6_K => blocks.for_each(|(b, y)| q6_k(b, y)),
    }
    Ok(())
}

/// block_q8_0 { f16 d; i8 qs[32] }: x = qs * d.
fn q8_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for (y, &q) in y.iter_mut().zip(&b[2..34]) {
        *y = f32::from(q as i8) * d;
    }
}

/// block_q4_0 { f16 d; u8 qs[16] }: low nibbles are elements 0..16, high nibbles 16..32;
/// x = (q - 8) * d.
fn q4_0(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 0);
    for (j, &q) in b[2..18].iter().enumerate() {
        y[j] = f32::from((q & 0x0f) as i8 - 8) * d;
        y[j + 16] = f32::from((q >> 4) as i8 - 8) * d;
    }
}

/// block_q4_1 { f16 d; f16 m; u8 qs[16] }: x = q * d + m (nibble order as Q4_0).
fn q4_1(b: &[u8], y: &mut [f32]) {
    let (d, m) = (f16_at(b, 0), f16_at(b, 2));
    for (j, &q) in b[4..20].iter().enumerate() {
        y[j] = f32::from(q & 0x0f) * d + m;
        y[j + 16] = f32::from(q >> 4) * d + m;
    }
}

/// The fifth bits of a Q5_0/Q5_1 block (little-endian u32 `qh`): bit j belongs to element j.
fn qh_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// block_q5_0 { f16 d; u8 qh[4]; u8 qs[16] }: x = ((nibble | fifth bit << 4) - 16) * d
/// (nibble order as Q4_0).
fn q5_0(b: &[u8], y: &mut [f32]) {
    let (d, qh) = (f16_at(b, 0), qh_at(b, 2));
    for (j, &q) in b[6..22].iter().enumerate() {
        let h0 = ((qh >> j) << 4) & 0x10;
        let h1 = (qh >> (j + 12)) & 0x10;
        y[j] = ((u32::from(q & 0x0f) | h0) as i32 - 16) as f32 * d;
        y[j + 16] = ((u32::from(q >> 4) | h1) as i32 - 16) as f32 * d;
    }
}

/// block_q5_1 { f16 d; f16 m; u8 qh[4]; u8 qs[16] }: x = (nibble | fifth bit << 4) * d + m.
fn q5_1(b: &[u8], y: &mut [f32]) {
    let (d, m, qh) = (f16_at(b, 0), f16_at(b, 2), qh_at(b, 4));
    for (j, &q) in b[8..24].iter().enumerate() {
        let h0 = ((qh >> j) << 4) & 0x10;
        let h1 = (qh >> (j + 12)) & 0x10;
        y[j] = (u32::from(q & 0x0f) | h0) as f32 * d + m;
        y[j + 16] = (u32::from(q >> 4) | h1) as f32 * d + m;
    }
}

/// ggml's `get_scale_min_k4`: 8 (scale, min) pairs of 6 bits packed into 12 bytes.
/// Pairs 0..4 sit in the low 6 bits of bytes 0..4 / 4..8; pairs 4..8 take their low
/// 4 bits from bytes 8..12 and their high 2 bits from the top of bytes 0..8.
pub fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

/// block_q2_K { u8 scales[16]; u8 qs[64]; f16 d; f16 dmin }: sixteen 16-value sub-blocks, each
/// with a 4-bit scale (low nibble) and 4-bit min (high nibble). Half h (128 values) uses quant
/// bytes 32h..32h + 32; its j-th 32 values take bits 2j..2j+1 of them, the first 16 from bytes
/// 0..16 (scale 8h + 2j), the next 16 from bytes 16..32 (scale 8h + 2j + 1).
/// x = (d * sc) * q - dmin * m.
fn q2_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 80), f16_at(b, 82));
    let mut i = 0;
    for half in 0..2 {
        let q = &b[16 + 32 * half..16 + 32 * half + 32];
        for j in 0..4 {
            for sub in 0..2 {
                let sc = b[8 * half + 2 * j + sub];
                let dl = d * f32::from(sc & 0x0f);
                let ml = dmin * f32::from(sc >> 4);
                for &qb in &q[16 * sub..16 * sub + 16] {
                    y[i] = dl * f32::from((qb >> (2 * j)) & 3) - ml;
                    i += 1;
                }
            }
        }
    }
}

/// Q3_K's sixteen 6-bit scales from its 12 packed bytes (ggml's kmask unpacking): scale i has
/// its low 4 bits in the low (i < 8) or high (i >= 8) nibble of byte i % 8, and its top 2 bits
/// at bits 2 (i / 4)..+1 of byte 8 + i % 4. Stored + 32.
pub fn q3_k_scale(packed: &[u8], i: usize) -> u8 {
    let lo = if i < 8 {
        packed[i] & 0x0f
    } else {
        packed[i - 8] >> 4
    };
    let hi = (packed[8 + i % 4] >> (2 * (i / 4))) & 3;
    lo | (hi << 4)
}

/// block_q3_K { u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d }: as Q2_K's layout of low bits
/// (sub-block 8h + 2j + sub, bits 2j of quant byte 32h + 16 sub + l), plus a high bit per value
/// in hmask[16 sub + l] at bit 4h + j; q = low - (high bit set ? 0 : 4) in -4..3 and
/// x = (d * (scale - 32)) * q.
fn q3_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 108);
    let (hmask, scales) = (&b[0..32], &b[96..108]);
    let mut i = 0;
    for half in 0..2 {
        let q = &b[32 + 32 * half..32 + 32 * half + 32];
        for j in 0..4 {
            let m = 1u8 << (4 * half + j);
            for sub in 0..2 {
                let dl = d * f32::from(q3_k_scale(scales, 8 * half + 2 * j + sub) as i8 - 32);
                for l in 0..16 {
                    let low = ((q[16 * sub + l] >> (2 * j)) & 3) as i8;
                    let high = if hmask[16 * sub + l] & m != 0 { 0 } else { 4 };
                    y[i] = dl * f32::from(low - high);
                    i += 1;
                }
            }
        }
    }
}

/// block_q4_K { f16 d; f16 dmin; u8 scales[12]; u8 qs[128] }: 8 sub-blocks of 32; each
/// 64-element chunk uses 32 bytes of qs, low nibbles first then high nibbles.
fn q4_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    for (chunk, (qs, y)) in b[16..144]
        .chunks_exact(32)
        .zip(y.chunks_exact_mut(64))
        .enumerate()
    {
        let (sc1, m1) = scale_min_k4(2 * chunk, scales);
        let (sc2, m2) = scale_min_k4(2 * chunk + 1, scales);
        let (d1, min1) = (d * f32::from(sc1), dmin * f32::from(m1));
        let (d2, min2) = (d * f32::from(sc2), dmin * f32::from(m2));
        for (l, &q) in qs.iter().enumerate() {
            y[l] = d1 * f32::from(q & 0x0f) - min1;
            y[l + 32] = d2 * f32::from(q >> 4) - min2;
        }
    }
}

/// block_q5_K { f16 d; f16 dmin; u8 scales[12]; u8 qh[32]; u8 qs[128] }: as Q4_K, plus a
/// fifth bit per value: chunk c's low-nibble sub-block takes bit 2c of qh[l], its high-nibble
/// sub-block bit 2c + 1.
fn q5_k(b: &[u8], y: &mut [f32]) {
    let (d, dmin) = (f16_at(b, 0), f16_at(b, 2));
    let scales = &b[4..16];
    let qh = &b[16..48];
    for (chunk, (qs, y)) in b[48..176]
        .chunks_exact(32)
        .zip(y.chunks_exact_mut(64))
        .enumerate()
    {
        let (sc1, m1) = scale_min_k4(2 * chunk, scales);
        let (sc2, m2) = scale_min_k4(2 * chunk + 1, scales);
        let (d1, min1) = (d * f32::from(sc1), dmin * f32::from(m1));
        let (d2, min2) = (d * f32::from(sc2), dmin * f32::from(m2));
        let (u1, u2) = (1u8 << (2 * chunk), 2u8 << (2 * chunk));
        for (l, &q) in qs.iter().enumerate() {
            let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            y[l] = d1 * f32::from((q & 0x0f) + h1) - min1;
            y[l + 32] = d2 * f32::from((q >> 4) + h2) - min2;
        }
    }
}

/// block_q6_K { u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d }: 6-bit values, low 4 bits
/// in ql, high 2 bits in qh; two 128-element halves, each with 8 scales of 16 elements.
fn q6_k(b: &[u8], y: &mut [f32]) {
    let d = f16_at(b, 208);
    for half in 0..2 {
        let ql = &b[64 * half..64 * half + 64];
        let qh = &b[128 + 32 * half..128 + 32 * half + 32];
        let sc = &b[192 + 8 * half..192 + 8 * half + 8];
        let y = &mut y[128 * half..128 * half + 128];
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0f) | ((qh[l] & 3) << 4)) as i8 - 32;
            let q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) as i8 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i8 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i8 - 32;
            let s = |k: usize| d * f32::from(sc[is + k] as i8);
            y[l] = s(0) * f32::from(q1);
            y[l + 32] = s(2) * f32::from(q2);
            y[l + 64] = s(4) * f32::from(q3);
            y[l + 96] = s(6) * f32::from(q4);
        }
    }
}
