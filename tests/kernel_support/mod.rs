//! Helpers shared by the kernel tests: seeded inputs, buffers, one-pass runs, readback and
//! tolerance checks.
#![allow(dead_code)] // each test binary uses a subset

use fuselm::gguf::{dequantize, quantize_q4_0, quantize_q4_1, quantize_q8_0, GgmlType};
use fuselm::gpu::{read_buffer, ContextOptions, GpuContext};
use fuselm::kernels::{DecodeState, WeightFormat};
use wgpu::util::DeviceExt;

/// Bit pattern written into output buffers before a run: a NaN, so any value a kernel fails to
/// write fails every tolerance check.
pub const POISON: u32 = 0x7fc0_dead;

/// xorshift64*: tiny, seeded, no dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next_u32(&mut self) -> u32 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 32) as u32
    }
    /// Uniform in [-1, 1).
    pub fn f32(&mut self) -> f32 {
        self.next_u32() as f32 / 2_147_483_648.0 - 1.0
    }
    pub fn vec(&mut self, n: usize, scale: f32) -> Vec<f32> {
        (0..n).map(|_| self.f32() * scale).collect()
    }
}

/// Prints a result line: stdout natively, the browser console under wasm-bindgen-test (where
/// `println!` goes nowhere; shown with `-- --nocapture`).
pub fn report(line: &str) {
    #[cfg(target_arch = "wasm32")]
    wasm_bindgen_test::console_log!("{line}");
    #[cfg(not(target_arch = "wasm32"))]
    println!("{line}");
}

/// A context with the default options ([`crate::common::gpu_context`]: one device per browser
/// test binary).
pub async fn context() -> GpuContext {
    crate::common::gpu_context(ContextOptions::default()).await
}

const USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

pub fn buffer_u32(ctx: &GpuContext, data: &[u32]) -> wgpu::Buffer {
    let data = if data.is_empty() { &[0u32][..] } else { data };
    ctx.device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("test"),
            contents: bytemuck::cast_slice(data),
            usage: USAGE,
        })
}

pub fn buffer_f32(ctx: &GpuContext, data: &[f32]) -> wgpu::Buffer {
    buffer_u32(ctx, bytemuck::cast_slice(data))
}

/// A buffer of `len` 4-byte values, all [`POISON`].
pub fn poisoned(ctx: &GpuContext, len: usize) -> wgpu::Buffer {
    buffer_u32(ctx, &vec![POISON; len.max(1)])
}

pub fn state(ctx: &GpuContext, pos: u32, n_tokens: u32) -> wgpu::Buffer {
    DecodeState::new(pos, n_tokens).create_buffer(ctx)
}

/// Records `f` into one compute pass and submits it.
pub fn run(ctx: &GpuContext, f: impl FnOnce(&mut wgpu::ComputePass<'_>)) {
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        f(&mut pass);
    }
    ctx.queue.submit([encoder.finish()]);
}

pub async fn read_u32(ctx: &GpuContext, buffer: &wgpu::Buffer, len: usize) -> Vec<u32> {
    let bytes = read_buffer(&ctx.device, &ctx.queue, buffer, 0, (len * 4) as u64)
        .await
        .expect("readback");
    bytemuck::cast_slice(&bytes).to_vec()
}

pub async fn read_f32(ctx: &GpuContext, buffer: &wgpu::Buffer, len: usize) -> Vec<f32> {
    let words = read_u32(ctx, buffer, len).await;
    words.into_iter().map(f32::from_bits).collect()
}

/// Asserts `|got - want| <= atol + rtol * |want|` everywhere (NaN fails) and returns the
/// largest `|got - want|` seen, printing it with the case name.
pub fn assert_close(case: &str, got: &[f32], want: &[f32], atol: f32, rtol: f32) -> f32 {
    assert_eq!(got.len(), want.len(), "{case}: length");
    let mut max_err = 0.0f32;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let err = (g - w).abs();
        let ok = err <= atol + rtol * w.abs();
        assert!(
            ok,
            "{case}: [{i}] got {g} want {w} (err {err}, atol {atol}, rtol {rtol})"
        );
        max_err = max_err.max(err);
    }
    report(&format!(
        "{case}: max abs err {max_err:e} (atol {atol:e}, rtol {rtol:e})"
    ));
    max_err
}

/// Random weights of `n` rows of `k` values in `format`: (ggml bytes, their exact f32
/// dequantization, the ggml type).
pub fn weights(
    rng: &mut Rng,
    format: WeightFormat,
    k: usize,
    n: usize,
) -> (Vec<u8>, Vec<f32>, GgmlType) {
    let x = rng.vec(k * n, 1.0);
    let ty = format.ggml();
    let bytes: Vec<u8> = match format {
        WeightFormat::F32 => bytemuck::cast_slice(&x).to_vec(),
        WeightFormat::F16 => x
            .iter()
            .flat_map(|v| fuselm::gguf::f32_to_f16(*v).to_le_bytes())
            .collect(),
        WeightFormat::Q8_0 => quantize_q8_0(&x),
        WeightFormat::Q4_0 => quantize_q4_0(&x),
        WeightFormat::Q4_1 => quantize_q4_1(&x),
        WeightFormat::Q5_0 => fuselm::gguf::quantize_q5_0(&x),
        WeightFormat::Q5_1 => fuselm::gguf::quantize_q5_1(&x),
        WeightFormat::BF16 => x
            .iter()
            .flat_map(|v| ((v.to_bits() >> 16) as u16).to_le_bytes())
            .collect(),
        // No K-quant quantizer here: random blocks with every bit pattern of the quants and
        // scales, and f16 super-scales small enough that values stay near ±1.
        WeightFormat::Q2_K
        | WeightFormat::Q3_K
        | WeightFormat::Q4_K
        | WeightFormat::Q5_K
        | WeightFormat::Q6_K => (0..k * n / 256)
            .flat_map(|_| k_quant_block(rng, format))
            .collect(),
    };
    let dense = dequantize(ty, &bytes, k * n).expect("dequantize");
    (bytes, dense, ty)
}

/// One random Q2_K (84 bytes), Q3_K (110 bytes), Q4_K (144 bytes), Q5_K (176 bytes) or Q6_K
/// (210 bytes) block in ggml's layout.
fn k_quant_block(rng: &mut Rng, format: WeightFormat) -> Vec<u8> {
    let mut b: Vec<u8> = (0..format.ggml().block_bytes())
        .map(|_| rng.next_u32() as u8)
        .collect();
    let f16 = |v: f32| fuselm::gguf::f32_to_f16(v).to_le_bytes();
    if format == WeightFormat::Q2_K {
        // value = d * sc * q - dmin * m with 4-bit sc, m and 2-bit q
        b[80..82].copy_from_slice(&f16(rng.f32().abs() / (15.0 * 3.0) * 2.0));
        b[82..84].copy_from_slice(&f16(rng.f32().abs() / 15.0));
    } else if format == WeightFormat::Q3_K {
        // value = d * (sc - 32) * q with 6-bit sc and q in -4..3
        b[108..110].copy_from_slice(&f16(rng.f32() / (32.0 * 4.0) * 2.0));
    } else if format == WeightFormat::Q4_K {
        // value = d * sc * q - dmin * m with 6-bit sc, m and 4-bit q
        b[0..2].copy_from_slice(&f16(rng.f32().abs() / (63.0 * 15.0) * 2.0));
        b[2..4].copy_from_slice(&f16(rng.f32().abs() / 63.0));
    } else if format == WeightFormat::Q5_K {
        // value = d * sc * q - dmin * m with 6-bit sc, m and 5-bit q
        b[0..2].copy_from_slice(&f16(rng.f32().abs() / (63.0 * 31.0) * 2.0));
        b[2..4].copy_from_slice(&f16(rng.f32().abs() / 63.0));
    } else {
        // value = d * sc * (q - 32) with i8 sc and 6-bit q
        b[208..210].copy_from_slice(&f16(rng.f32() / (127.0 * 32.0) * 2.0));
    }
    b
}

/// Per-output tolerance for a dot product of length k: `rel * sum_c |w_c x_c|`, the scale of
/// f32 summation-order error.
pub fn dot_tolerance(w: &[f32], x: &[f32], k: usize, rel: f32) -> Vec<f32> {
    w.chunks(k)
        .map(|row| rel * row.iter().zip(x).map(|(a, b)| (a * b).abs()).sum::<f32>())
        .collect()
}

/// Asserts `|got - want| <= tol[i]` (NaN fails); returns the largest `|got - want| / tol`.
pub fn assert_within(case: &str, got: &[f32], want: &[f32], tol: &[f32]) -> f32 {
    assert_eq!(got.len(), want.len(), "{case}: length");
    let mut worst = 0.0f32;
    for (i, ((g, w), t)) in got.iter().zip(want).zip(tol).enumerate() {
        let err = (g - w).abs();
        assert!(
            err <= *t + f32::MIN_POSITIVE,
            "{case}: [{i}] got {g} want {w} (err {err}, tol {t})"
        );
        worst = worst.max(err / t.max(f32::MIN_POSITIVE));
    }
    report(&format!("{case}: max err / tolerance {worst:.3}"));
    worst
}
