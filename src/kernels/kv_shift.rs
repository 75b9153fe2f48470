//! Context shift of a KV cache: dropping rows and re-rotating the keys that move
//! (`shaders/kv_shift.wgsl`).

use super::attention::KvFormat;
use super::binding::Res;
use super::checks::{check_bytes, require};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use super::rope::RopeStyle;
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Mirrors `Params` in `shaders/kv_shift.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct KvShiftParams {
    head_dim: u32,
    n_rot: u32,
    drop: u32,
    first: u32,
    rows: u32,
    base: u32,
    head_stride: u32,
    neox: u32,
    theta_scale: f32,
    freq_scale: f32,
    _pad: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<KvShiftParams>() == 48);

/// Largest head_dim the kernel's workgroup row holds.
const MAX_HEAD_DIM: u32 = 512;
/// Most rotation pairs (the factors of 1 bound where a model has none).
const MAX_PAIRS: usize = 256;

/// The rows a shift moves: `[keep + drop, n)` go to `[keep, n - drop)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShiftRows {
    pub keep: u32,
    pub drop: u32,
    pub n: u32,
}

/// The rotation of a K cache's rows (None for V): as the model's RoPE of that layer.
#[derive(Debug, Clone, Copy)]
pub struct ShiftRotation<'a> {
    pub n_rot: u32,
    pub freq_base: f32,
    pub freq_scale: f32,
    pub style: RopeStyle,
    pub factors: Option<&'a wgpu::Buffer>,
}

/// One cache region: `heads` heads of `[n_ctx, head_dim]` rows, head 0 at element `base` of
/// `cache`.
#[derive(Debug, Clone, Copy)]
pub struct ShiftRegion<'a> {
    pub cache: Res<'a>,
    pub base: u64,
    pub heads: u32,
    pub n_ctx: u32,
    pub head_dim: u32,
}

/// Most rows of one wave (a dispatch's x dimension).
const MAX_WAVE: u32 = 65_535;

/// Moves and re-rotates KV rows in place: waves of at most `drop` rows (sources and destinations
/// apart), one workgroup per row and head.
#[derive(Debug)]
pub struct KvShift {
    pipeline: Pipeline,
    kv: KvFormat,
    ones: wgpu::Buffer,
}

impl KvShift {
    /// A shift of `kv`-typed caches (F16 fails without SHADER_F16).
    pub async fn new(ctx: &GpuContext, kv: KvFormat) -> Result<Self> {
        let source = compose(&[
            kv.prelude(ctx)?,
            shaders::COMMON,
            shaders::ROPE_MATH,
            shaders::KV_SHIFT,
        ]);
        let slots = [Slot::Uniform, Slot::ReadWrite, Slot::Read];
        let pipeline = Pipeline::new(ctx, "kv_shift", &source, &slots).await?;
        let ones = ctx.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("kv_shift factors of 1"),
            contents: bytemuck::cast_slice(&[1.0f32; MAX_PAIRS]),
            usage: wgpu::BufferUsages::STORAGE,
        });
        Ok(Self { pipeline, kv, ones })
    }

    pub fn format(&self) -> KvFormat {
        self.kv
    }

    /// The call that shifts `rows` of `region`, rotating them when `rotation` is given (K).
    pub fn bind(
        &self,
        ctx: &GpuContext,
        region: ShiftRegion<'_>,
        rows: ShiftRows,
        rotation: Option<ShiftRotation<'_>>,
    ) -> Result<KvShiftCall> {
        let ShiftRegion {
            cache,
            base,
            heads,
            n_ctx,
            head_dim,
        } = region;
        require(
            head_dim > 0 && head_dim <= MAX_HEAD_DIM && heads > 0,
            "kv_shift: head_dim must be in 1..=512 and heads > 0",
        )?;
        require(
            rows.drop > 0 && rows.keep + rows.drop <= rows.n && rows.n <= n_ctx,
            "kv_shift: rows to drop must lie in the valid rows",
        )?;
        let head_stride = u64::from(n_ctx) * u64::from(head_dim);
        let elements = base + u64::from(heads) * head_stride;
        require(
            elements <= u64::from(u32::MAX),
            "kv_shift: cache region beyond 2^32 elements",
        )?;
        check_bytes(ctx, "kv_shift cache", cache, elements * self.kv.bytes())?;
        let (n_rot, theta_scale, freq_scale, neox, factors) = match rotation {
            Some(r) => {
                require(
                    r.n_rot > 0 && r.n_rot % 2 == 0 && r.n_rot <= head_dim,
                    "kv_shift: n_rot must be even and in 2..=head_dim",
                )?;
                require(
                    r.n_rot as usize / 2 <= MAX_PAIRS && r.freq_base > 0.0,
                    "kv_shift: at most 256 rotation pairs and freq_base > 0",
                )?;
                // As rope.rs: powf(freq_base, -2.0f / n_dims).
                let theta_scale = r.freq_base.powf(-2.0 / r.n_rot as f32);
                let neox = u32::from(r.style == RopeStyle::Neox);
                (
                    r.n_rot,
                    theta_scale,
                    r.freq_scale,
                    neox,
                    r.factors.unwrap_or(&self.ones),
                )
            }
            None => (0, 1.0, 1.0, 0, &self.ones),
        };
        let mut waves = Vec::new();
        let mut first = rows.keep + rows.drop;
        while first < rows.n {
            let count = rows.drop.min(rows.n - first).min(MAX_WAVE);
            let params = KvShiftParams {
                head_dim,
                n_rot,
                drop: rows.drop,
                first,
                rows: count,
                base: base as u32,
                head_stride: head_stride as u32,
                neox,
                theta_scale,
                freq_scale,
                _pad: [0; 2],
            };
            let bound = self
                .pipeline
                .bind(ctx, &params, &[cache, Res::from(factors)])?;
            waves.push((bound, count));
            first += count;
        }
        Ok(KvShiftCall { waves, heads })
    }
}

/// [`KvShift`] bound to one cache region.
#[derive(Debug)]
pub struct KvShiftCall {
    /// Each wave's call and rows, in the order they must run.
    waves: Vec<(Bound, u32)>,
    heads: u32,
}

impl KvShiftCall {
    /// Records the waves in order (a pass orders dispatches that write one buffer).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        for (bound, rows) in &self.waves {
            bound.dispatch(pass, [*rows, self.heads, 1]);
        }
    }

    /// Destroys the calls' uniform buffers (a shift is bound for one use).
    pub fn release(&self, ctx: &GpuContext) {
        for (bound, _) in &self.waves {
            bound.release(ctx);
        }
    }
}
