//! Reference quantizers (f32 -> Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 bytes), ported from ggml's
//! `quantize_row_*_ref`, to build test files and the synthetic model. They reproduce ggml's
//! rounding (roundf / truncating int8 casts, scale rounded to f16 only when stored), so the
//! bytes match what `llama-quantize` would write for the same input.
//!
//! Input lengths that are not a multiple of 32 are zero-padded up to a whole block.
//!
//! The K-quant quantizers at the end are plain min/max and absmax ones, not ggml's iterative
//! searches: valid Q4_K/Q5_K/Q6_K bytes for synthetic models and tests, not `llama-quantize`'s.

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

/// ggml `quantize_row_q5_0_ref`: d = (signed value of max magnitude) / -16,
/// q = min(31, trunc(x / d + 16.5)); the fifth bits go to `qh`.
pub fn quantize_q5_0(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(QK) * 22);
    for b in blocks(x) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in &b {
            if amax < v.abs() {
                amax = v.abs();
                max = v;
            }
        }
        let d = max / -16.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let q: Vec<u8> = b
            .iter()
            .map(|v| ((v * id + 16.5) as i8).min(31) as u8)
            .collect();
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        push_q5(&q, &mut out);
    }
    out
}

/// ggml `quantize_row_q5_1_ref`: d = (max - min) / 31, m = min, q = trunc((x - min) / d + 0.5).
pub fn quantize_q5_1(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(QK) * 24);
    for b in blocks(x) {
        let (mut min, mut max) = (f32::MAX, -f32::MAX);
        for &v in &b {
            min = if v < min { v } else { min };
            max = if v > max { v } else { max };
        }
        let d = (max - min) / 31.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let q: Vec<u8> = b.iter().map(|v| ((v - min) * id + 0.5) as u8).collect();
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend_from_slice(&f32_to_f16(min).to_le_bytes());
        push_q5(&q, &mut out);
    }
    out
}

/// The `qh` word (fifth bit of element j at bit j) and the 16 nibble bytes of a 32-value block.
fn push_q5(q: &[u8], out: &mut Vec<u8>) {
    let qh = q
        .iter()
        .enumerate()
        .fold(0u32, |h, (j, &v)| h | (u32::from(v >> 4 & 1) << j));
    out.extend_from_slice(&qh.to_le_bytes());
    out.extend((0..QK / 2).map(|j| (q[j] & 0x0f) | ((q[j + QK / 2] & 0x0f) << 4)));
}

/// The scales of a plain min/max K-quant superblock (Q4_K with `levels` = 15, Q5_K with 31):
/// returns d, dmin, the 6-bit sc_j and m_j of the eight 32-value sub-blocks, and each value's
/// quant. Per sub-block j: scale s_j = (max - min) / levels and offset o_j = max(0, -min);
/// sc_j, m_j are s_j / d and o_j / dmin rounded, with d = max s / 63, dmin = max o / 63; then
/// q = round((x + dmin m_j) / (d sc_j)) in 0..=levels.
fn min_max_superblock(b: &[f32; 256], levels: f32) -> (f32, f32, [u8; 8], [u8; 8], [u8; 256]) {
    let (mut s, mut o) = ([0.0f32; 8], [0.0f32; 8]);
    for (j, sub) in b.chunks_exact(32).enumerate() {
        let min = sub.iter().fold(f32::MAX, |m, &v| m.min(v)).min(0.0);
        let max = sub.iter().fold(-f32::MAX, |m, &v| m.max(v));
        s[j] = (max - min) / levels;
        o[j] = -min;
    }
    let rounded = |v: f32| super::f16::f16_to_f32(f32_to_f16(v));
    let d = rounded(s.iter().fold(0.0f32, |m, &v| m.max(v)) / 63.0);
    let dmin = rounded(o.iter().fold(0.0f32, |m, &v| m.max(v)) / 63.0);
    let six = |v: f32, by: f32| {
        if by > 0.0 {
            (v / by).round().clamp(0.0, 63.0) as u8
        } else {
            0
        }
    };
    let sc = s.map(|v| six(v, d));
    let m = o.map(|v| six(v, dmin));
    let mut q = [0u8; 256];
    for (i, q) in q.iter_mut().enumerate() {
        let j = i / 32;
        let step = d * f32::from(sc[j]);
        let v = b[i] + dmin * f32::from(m[j]);
        if step > 0.0 {
            *q = (v / step).round().clamp(0.0, levels) as u8;
        }
    }
    (d, dmin, sc, m, q)
}

/// d, dmin and the 12 packed scale bytes of a K-quant superblock (the inverse of `scale_min_k4`).
fn push_k_scales(d: f32, dmin: f32, sc: &[u8; 8], m: &[u8; 8], out: &mut Vec<u8>) {
    out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    out.extend_from_slice(&f32_to_f16(dmin).to_le_bytes());
    let mut packed = [0u8; 12];
    for j in 0..4 {
        packed[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6);
        packed[j + 4] = (m[j] & 63) | ((m[j + 4] >> 4) << 6);
        packed[j + 8] = (sc[j + 4] & 0x0f) | ((m[j + 4] & 0x0f) << 4);
    }
    out.extend_from_slice(&packed);
}

/// Zero-padded 256-value superblocks of `x`.
fn superblocks(x: &[f32]) -> impl Iterator<Item = [f32; 256]> + '_ {
    x.chunks(256).map(|c| {
        let mut b = [0.0f32; 256];
        b[..c.len()].copy_from_slice(c);
        b
    })
}

/// A plain min/max Q4_K quantizer (not ggml's iterative `make_qkx2_quants`: the bytes differ
/// from `llama-quantize`'s, the format is the same), for synthetic models and tests; see
/// `min_max_superblock`. Lengths are zero-padded to 256.
pub fn quantize_q4_k(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(256) * 144);
    for b in superblocks(x) {
        let (d, dmin, sc, m, q) = min_max_superblock(&b, 15.0);
        push_k_scales(d, dmin, &sc, &m, &mut out);
        for chunk in 0..4 {
            for l in 0..32 {
                out.push(q[64 * chunk + l] | (q[64 * chunk + 32 + l] << 4));
            }
        }
    }
    out
}

/// A plain min/max Q5_K quantizer (as [`quantize_q4_k`], 32 levels), for synthetic models and
/// tests. Lengths are zero-padded to 256.
pub fn quantize_q5_k(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(256) * 176);
    for b in superblocks(x) {
        let (d, dmin, sc, m, q) = min_max_superblock(&b, 31.0);
        push_k_scales(d, dmin, &sc, &m, &mut out);
        let mut qh = [0u8; 32];
        for chunk in 0..4 {
            for (l, h) in qh.iter_mut().enumerate() {
                *h |= (q[64 * chunk + l] >> 4) << (2 * chunk);
                *h |= (q[64 * chunk + 32 + l] >> 4) << (2 * chunk + 1);
            }
        }
        out.extend_from_slice(&qh);
        for chunk in 0..4 {
            for l in 0..32 {
                out.push((q[64 * chunk + l] & 0x0f) | ((q[64 * chunk + 32 + l] & 0x0f) << 4));
            }
        }
    }
    out
}

/// A plain min/max Q2_K quantizer (not ggml's `make_qkx2_quants`), for synthetic models and
/// tests: per 16 values a scale s_i = (max - min) / 3 and offset o_i = max(0, -min), stored as
/// 4-bit sc_i = round(s_i / d), m_i = round(o_i / dmin) with d = max s / 15, dmin = max o / 15;
/// q = round((x + dmin m_i) / (d sc_i)) in 0..=3, in ggml's layout. Lengths are zero-padded to 256.
pub fn quantize_q2_k(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(256) * 84);
    let rounded = |v: f32| super::f16::f16_to_f32(f32_to_f16(v));
    let four = |v: f32, by: f32| {
        if by > 0.0 {
            (v / by).round().clamp(0.0, 15.0) as u8
        } else {
            0
        }
    };
    for b in superblocks(x) {
        let (mut s, mut o) = ([0.0f32; 16], [0.0f32; 16]);
        for (i, sub) in b.chunks_exact(16).enumerate() {
            let min = sub.iter().fold(f32::MAX, |m, &v| m.min(v)).min(0.0);
            let max = sub.iter().fold(-f32::MAX, |m, &v| m.max(v));
            s[i] = (max - min) / 3.0;
            o[i] = -min;
        }
        let d = rounded(s.iter().fold(0.0f32, |m, &v| m.max(v)) / 15.0);
        let dmin = rounded(o.iter().fold(0.0f32, |m, &v| m.max(v)) / 15.0);
        let sc = s.map(|v| four(v, d));
        let m = o.map(|v| four(v, dmin));
        out.extend((0..16).map(|i| sc[i] | (m[i] << 4)));
        let mut qs = [0u8; 64];
        for (v, &x) in b.iter().enumerate() {
            let i = v / 16;
            let step = d * f32::from(sc[i]);
            let q = if step > 0.0 {
                ((x + dmin * f32::from(m[i])) / step)
                    .round()
                    .clamp(0.0, 3.0) as u8
            } else {
                0
            };
            let (h, j, sub, l) = (v / 128, (v / 32) % 4, (v / 16) % 2, v % 16);
            qs[32 * h + 16 * sub + l] |= q << (2 * j);
        }
        out.extend_from_slice(&qs);
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
        out.extend_from_slice(&f32_to_f16(dmin).to_le_bytes());
    }
    out
}

/// A plain absmax Q3_K quantizer (not ggml's `make_q3_quants`), for synthetic models and tests:
/// per 16 values a scale s_i = max|x| / 4, stored as a 6-bit signed sc_i = round(s_i / d) with
/// d = max s / 31; q = round(x / (d sc_i)) in -4..=3, in ggml's hmask/qs/packed-scales layout.
/// Lengths are zero-padded to 256.
pub fn quantize_q3_k(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(256) * 110);
    for b in superblocks(x) {
        let s: Vec<f32> = b
            .chunks_exact(16)
            .map(|g| g.iter().fold(0.0f32, |m, &v| m.max(v.abs())) / 4.0)
            .collect();
        let d = super::f16::f16_to_f32(f32_to_f16(s.iter().fold(0.0f32, |m, &v| m.max(v)) / 31.0));
        let sc: Vec<i8> = s
            .iter()
            .map(|&v| {
                if d > 0.0 {
                    (v / d).round().clamp(-32.0, 31.0) as i8
                } else {
                    0
                }
            })
            .collect();
        let (mut hmask, mut qs) = ([0u8; 32], [0u8; 64]);
        for (v, &x) in b.iter().enumerate() {
            let step = d * f32::from(sc[v / 16]);
            let q = if step != 0.0 {
                (x / step).round().clamp(-4.0, 3.0) as i8
            } else {
                0
            };
            let u = (q + 4) as u8; // low 2 bits in qs, the third in hmask
            let (h, j, sub, l) = (v / 128, (v / 32) % 4, (v / 16) % 2, v % 16);
            qs[32 * h + 16 * sub + l] |= (u & 3) << (2 * j);
            hmask[16 * sub + l] |= (u >> 2) << (4 * h + j);
        }
        let mut packed = [0u8; 12];
        for (i, &v) in sc.iter().enumerate() {
            let stored = (v + 32) as u8;
            if i < 8 {
                packed[i] |= stored & 0x0f;
            } else {
                packed[i - 8] |= (stored & 0x0f) << 4;
            }
            packed[8 + i % 4] |= (stored >> 4) << (2 * (i / 4));
        }
        out.extend_from_slice(&hmask);
        out.extend_from_slice(&qs);
        out.extend_from_slice(&packed);
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    }
    out
}

/// A plain absmax Q6_K quantizer (not ggml's `make_qx_quants`), for synthetic models and
/// tests: per 16 values a scale s_i = max|x| / 31, stored as i8 sc_i = round(s_i / d) with
/// d = max s / 127; q = round(x / (d sc_i)) in -32..31, stored + 32 in ggml's ql/qh layout.
/// Lengths are zero-padded to 256.
pub fn quantize_q6_k(x: &[f32]) -> Vec<u8> {
    let mut out = Vec::with_capacity(x.len().div_ceil(256) * 210);
    for c in x.chunks(256) {
        let mut b = [0.0f32; 256];
        b[..c.len()].copy_from_slice(c);
        let s: Vec<f32> = b
            .chunks_exact(16)
            .map(|g| g.iter().fold(0.0f32, |m, &v| m.max(v.abs())) / 31.0)
            .collect();
        let d = super::f16::f16_to_f32(f32_to_f16(s.iter().fold(0.0f32, |m, &v| m.max(v)) / 127.0));
        let sc: Vec<i8> = s
            .iter()
            .map(|&v| {
                if d > 0.0 {
                    (v / d).round().clamp(-128.0, 127.0) as i8
                } else {
                    0
                }
            })
            .collect();
        let q: Vec<u8> = (0..256)
            .map(|i| {
                let step = d * f32::from(sc[i / 16]);
                let v = if step != 0.0 {
                    (b[i] / step).round().clamp(-32.0, 31.0)
                } else {
                    0.0
                };
                (v as i8 + 32) as u8
            })
            .collect();
        let (mut ql, mut qh) = ([0u8; 128], [0u8; 64]);
        for half in 0..2 {
            let q = &q[128 * half..];
            for l in 0..32 {
                ql[64 * half + l] = (q[l] & 0x0f) | ((q[l + 64] & 0x0f) << 4);
                ql[64 * half + l + 32] = (q[l + 32] & 0x0f) | ((q[l + 96] & 0x0f) << 4);
                qh[32 * half + l] = (q[l] >> 4)
                    | ((q[l + 32] >> 4) << 2)
                    | ((q[l + 64] >> 4) << 4)
                    | ((q[l + 96] >> 4) << 6);
            }
        }
        out.extend_from_slice(&ql);
        out.extend_from_slice(&qh);
        out.extend(sc.iter().map(|&v| v as u8));
        out.extend_from_slice(&f32_to_f16(d).to_le_bytes());
    }
    out
}

/// BF16 bytes of `x`, rounded to nearest even (NaN stays NaN).
pub fn quantize_bf16(x: &[f32]) -> Vec<u8> {
    x.iter()
        .flat_map(|v| {
            let bits = v.to_bits();
            let h = if v.is_nan() {
                (bits >> 16) as u16 | 0x40
            } else {
                ((bits + 0x7fff + ((bits >> 16) & 1)) >> 16) as u16
            };
            h.to_le_bytes()
        })
        .collect()
}
