//! Rotary position embedding of Q and K, in place.

use super::attention::AttentionShape;
use super::checks::{check_buffer, check_tokens, require};
use super::dispatch::{grid, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Which dims rope pairs, as llama.cpp's rope modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RopeStyle {
    /// `LLAMA_ROPE_TYPE_NORM` (llama): pairs `(2i, 2i + 1)`.
    Normal,
    /// `LLAMA_ROPE_TYPE_NEOX` (qwen2, gpt-neox...): pairs `(i, i + n_rot / 2)`.
    Neox,
}

/// Mirrors `Params` in `shaders/rope.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct RopeParams {
    n_head: u32,
    n_head_kv: u32,
    head_dim: u32,
    n_rot: u32,
    theta_scale: f32,
    neox: u32,
    freq_scale: f32,
    mscale: f32,
}
const _: () = assert!(std::mem::size_of::<RopeParams>() == 32);

/// RoPE beyond `pos * freq_base^(-2i / n_rot)` (ggml's `rope_ext` with YaRN's extrapolation
/// off): each pair's angle divided by `factors[i]` (Llama 3's `rope_freqs`, Phi-3's LongRoPE
/// factors; `[n_rot / 2]` f32) and multiplied by `freq_scale` (1 / linear scaling factor), cos
/// and sin by `mscale` (LongRoPE's attention factor).
#[derive(Debug, Clone, Copy)]
pub struct RopeExtension<'a> {
    pub factors: Option<&'a wgpu::Buffer>,
    pub freq_scale: f32,
    pub mscale: f32,
}

impl RopeExtension<'_> {
    /// Plain RoPE.
    pub const NONE: RopeExtension<'static> = RopeExtension {
        factors: None,
        freq_scale: 1.0,
        mscale: 1.0,
    };
}

/// Most rotation pairs per head (the factors of 1 bound where a model has none).
const MAX_PAIRS: u64 = 512;

const WG: u64 = 64;

/// Rotates pair `i < n_rot / 2` of every Q and K head of token `t` by
/// `theta = (state.pos + t) * freq_base^(-2i / n_rot)` (and [`RopeExtension`]).
#[derive(Debug, Clone)]
pub struct Rope {
    pipeline: Pipeline,
    /// [`MAX_PAIRS`] factors of 1, for models without frequency factors.
    ones: wgpu::Buffer,
}

/// [`Rope`] bound to its buffers.
#[derive(Debug, Clone)]
pub struct RopeCall {
    bound: Bound,
    per_token: u64,
    max_tokens: u32,
    max_dim: u32,
}

impl Rope {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let source = compose(&[shaders::COMMON, shaders::ROPE_MATH, shaders::ROPE]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::ReadWrite,
            Slot::ReadWrite,
            Slot::Read,
        ];
        let pipeline = Pipeline::new(ctx, "rope", &source, &slots).await?;
        let ones = ctx.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("rope factors of 1"),
            contents: bytemuck::cast_slice(&[1.0f32; MAX_PAIRS as usize]),
            usage: wgpu::BufferUsages::STORAGE,
        });
        Ok(Self { pipeline, ones })
    }

    /// * `q`: `[max_tokens, n_head, head_dim]`, `k`: `[max_tokens, n_head_kv, head_dim]`,
    ///   both rotated in place. `n_rot`: rotated dims per head (even, `<= head_dim`).
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        shape: &AttentionShape,
        n_rot: u32,
        freq_base: f32,
        ext: RopeExtension<'_>,
        style: RopeStyle,
        state: &wgpu::Buffer,
        q: &wgpu::Buffer,
        k: &wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<RopeCall> {
        shape.validate()?;
        require(max_tokens > 0, "rope: max_tokens must be > 0")?;
        require(
            n_rot > 0 && n_rot % 2 == 0 && n_rot <= shape.head_dim,
            "rope: n_rot must be even and in 2..=head_dim",
        )?;
        require(freq_base > 0.0, "rope: freq_base must be > 0")?;
        require(
            u64::from(n_rot / 2) <= MAX_PAIRS,
            "rope: at most 512 rotation pairs per head",
        )?;
        require(
            ext.freq_scale.is_finite() && ext.freq_scale > 0.0 && ext.mscale.is_finite(),
            "rope: freq_scale must be positive and mscale finite",
        )?;
        let factors = ext.factors.unwrap_or(&self.ones);
        check_buffer(ctx, "rope factors", factors, u64::from(n_rot / 2))?;
        let t = u64::from(max_tokens);
        check_buffer(ctx, "rope state", state, 4)?;
        check_buffer(ctx, "rope q", q, t * shape.q_row())?;
        check_buffer(ctx, "rope k", k, t * shape.kv_row())?;
        let params = RopeParams {
            n_head: shape.n_head,
            n_head_kv: shape.n_head_kv,
            head_dim: shape.head_dim,
            n_rot,
            // As ggml_rope_cache_init: powf(freq_base, -2.0f / n_dims).
            theta_scale: freq_base.powf(-2.0 / n_rot as f32),
            neox: u32::from(style == RopeStyle::Neox),
            freq_scale: ext.freq_scale,
            mscale: ext.mscale,
        };
        let per_token = u64::from(shape.n_head + shape.n_head_kv) * u64::from(n_rot / 2);
        grid((t * per_token).div_ceil(WG), max_groups(ctx))?;
        Ok(RopeCall {
            bound: self.pipeline.bind(ctx, &params, &[state, q, k, factors])?,
            per_token,
            max_tokens,
            max_dim: max_groups(ctx),
        })
    }
}

impl RopeCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        check_tokens("rope", n_tokens, self.max_tokens)?;
        let (x, y) = grid(
            (u64::from(n_tokens) * self.per_token).div_ceil(WG),
            self.max_dim,
        )?;
        self.bound.dispatch(pass, [x, y, 1]);
        Ok(())
    }
}
