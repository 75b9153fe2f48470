//! Causal grouped-query attention over the KV cache.

use super::binding::Res;
use super::checks::{check_buffer, check_bytes, check_tokens, require};
use super::dispatch::{check_dim, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;
use crate::shaders;

/// The head geometry shared by [`super::Rope`], [`super::KvStore`] and [`Attention`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttentionShape {
    pub n_head: u32,
    pub n_head_kv: u32,
    pub head_dim: u32,
    /// KV cache capacity in positions.
    pub n_ctx: u32,
}

/// Element type of the KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvFormat {
    /// Works on every adapter.
    F32,
    /// Half the memory and bandwidth; needs `wgpu::Features::SHADER_F16` (absent in
    /// browsers on SwiftShader and many others, so callers fall back to `F32`).
    F16,
}

impl KvFormat {
    pub fn bytes(self) -> u64 {
        match self {
            KvFormat::F32 => 4,
            KvFormat::F16 => 2,
        }
    }

    /// The WGSL prelude (`alias kv_t`), after checking the device can run it.
    pub(crate) fn prelude(self, ctx: &GpuContext) -> Result<&'static str> {
        match self {
            KvFormat::F32 => Ok(shaders::KV_F32),
            KvFormat::F16 if ctx.has(wgpu::Features::SHADER_F16) => Ok(shaders::KV_F16),
            KvFormat::F16 => Err(FuselmError::InvalidArgument(
                "f16 KV cache needs the shader-f16 feature, which this device lacks".into(),
            )),
        }
    }
}

/// Largest head_dim attention.wgsl handles (4 output dims per invocation of 64).
pub const MAX_HEAD_DIM: u32 = 256;

impl AttentionShape {
    /// Checks the geometry: non-zero dims, whole query groups per KV head.
    pub fn validate(&self) -> Result<()> {
        let s = self;
        require(
            s.n_head > 0 && s.n_head_kv > 0 && s.head_dim > 0 && s.n_ctx > 0,
            "attention shape: dims must be > 0",
        )?;
        require(
            s.n_head % s.n_head_kv == 0,
            "attention shape: n_head must be a multiple of n_head_kv",
        )
    }

    /// Floats in one step-row of Q (`n_head * head_dim`).
    pub fn q_row(&self) -> u64 {
        u64::from(self.n_head) * u64::from(self.head_dim)
    }

    /// Floats in one step-row of K or V (`n_head_kv * head_dim`).
    pub fn kv_row(&self) -> u64 {
        u64::from(self.n_head_kv) * u64::from(self.head_dim)
    }

    /// Elements in one layer's K (or V) cache: `[n_head_kv, n_ctx, head_dim]`.
    pub fn cache_len(&self) -> u64 {
        self.kv_row() * u64::from(self.n_ctx)
    }

    /// Bytes of one layer's K (or V) cache, rounded up to 4 (a storage-buffer multiple).
    pub fn cache_bytes(&self, kv: KvFormat) -> u64 {
        (self.cache_len() * kv.bytes()).div_ceil(4) * 4
    }
}

/// Which keys a query sees and how its scores are scaled.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionMask {
    /// Scores are `q · k * scale`.
    pub scale: f32,
    /// Sliding window: a query at position p sees keys at p - window < j <= p.
    pub window: Option<u32>,
}

impl AttentionMask {
    /// Every earlier key, scale `1 / sqrt(head_dim)`.
    pub fn standard(head_dim: u32) -> Self {
        Self {
            scale: 1.0 / (head_dim as f32).sqrt(),
            window: None,
        }
    }
}

/// Mirrors `Params` in `shaders/attention.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct AttentionParams {
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    n_ctx: u32,
    scale: f32,
    window: u32,
    _pad: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<AttentionParams>() == 32);

/// `out[t][h] = softmax(q[t][h] · K[g]^T / sqrt(head_dim)) V[g]` over cache positions
/// `0..=state.pos + t`, `g = h / (n_head / n_head_kv)`. One workgroup per (head, token).
#[derive(Debug, Clone)]
pub struct Attention {
    pipeline: Pipeline,
    kv: KvFormat,
}

/// [`Attention`] bound to its buffers.
#[derive(Debug, Clone)]
pub struct AttentionCall {
    bound: Bound,
    n_head: u32,
    max_tokens: u32,
    max_dim: u32,
}

impl Attention {
    /// An attention kernel over a `kv`-typed cache (F16 fails without SHADER_F16).
    pub async fn new(ctx: &GpuContext, kv: KvFormat) -> Result<Self> {
        let source = compose(&[kv.prelude(ctx)?, shaders::COMMON, shaders::ATTENTION]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "attention", &source, &slots).await?;
        Ok(Self { pipeline, kv })
    }

    /// * `q`, `out`: `[max_tokens, n_head, head_dim]`;
    /// * `k_cache`, `v_cache`: `[n_head_kv, n_ctx, head_dim]` of the kernel's [`KvFormat`]
    ///   (written by [`super::KvStore`]).
    #[allow(clippy::too_many_arguments)]
    pub fn bind<'a>(
        &self,
        ctx: &GpuContext,
        shape: &AttentionShape,
        state: &'a wgpu::Buffer,
        q: &'a wgpu::Buffer,
        k_cache: impl Into<Res<'a>>,
        v_cache: impl Into<Res<'a>>,
        out: &'a wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<AttentionCall> {
        let mask = AttentionMask::standard(shape.head_dim);
        self.bind_masked(
            ctx, shape, mask, state, q, k_cache, v_cache, out, max_tokens,
        )
    }

    /// [`Attention::bind`] with the model's score scale and sliding window.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_masked<'a>(
        &self,
        ctx: &GpuContext,
        shape: &AttentionShape,
        mask: AttentionMask,
        state: &'a wgpu::Buffer,
        q: &'a wgpu::Buffer,
        k_cache: impl Into<Res<'a>>,
        v_cache: impl Into<Res<'a>>,
        out: &'a wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<AttentionCall> {
        let (k_cache, v_cache) = (k_cache.into(), v_cache.into());
        shape.validate()?;
        require(max_tokens > 0, "attention: max_tokens must be > 0")?;
        if shape.head_dim > MAX_HEAD_DIM {
            return Err(FuselmError::InvalidArgument(format!(
                "attention: head_dim {} > {MAX_HEAD_DIM}",
                shape.head_dim
            )));
        }
        let t = u64::from(max_tokens);
        check_buffer(ctx, "attention state", state, 4)?;
        check_buffer(ctx, "attention q", q, t * shape.q_row())?;
        let cache = shape.cache_bytes(self.kv);
        check_bytes(ctx, "attention k_cache", k_cache, cache)?;
        check_bytes(ctx, "attention v_cache", v_cache, cache)?;
        check_buffer(ctx, "attention out", out, t * shape.q_row())?;
        let params = AttentionParams {
            n_head: shape.n_head,
            n_head_kv: shape.n_head_kv,
            head_dim: shape.head_dim,
            n_ctx: shape.n_ctx,
            scale: mask.scale,
            window: mask.window.unwrap_or(0),
            _pad: [0; 2],
        };
        let n_head = check_dim(u64::from(shape.n_head), max_groups(ctx))?;
        Ok(AttentionCall {
            bound: self.pipeline.bind(
                ctx,
                &params,
                &[state.into(), q.into(), k_cache, v_cache, out.into()],
            )?,
            n_head,
            max_tokens,
            max_dim: max_groups(ctx),
        })
    }
}

impl AttentionCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        check_tokens("attention", n_tokens, self.max_tokens)?;
        let y = check_dim(u64::from(n_tokens), self.max_dim)?;
        self.bound.dispatch(pass, [self.n_head, y, 1]);
        Ok(())
    }
}
