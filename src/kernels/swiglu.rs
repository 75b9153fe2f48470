//! The gated activation of the FFN: SwiGLU (llama, qwen) or GeGLU (gemma).

use super::checks::{check_buffer, check_tokens, require};
use super::dispatch::{grid, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use crate::error::Result;
use crate::gguf::FfnActivation;
use crate::gpu::GpuContext;
use crate::shaders;

/// Mirrors `Params` in `shaders/swiglu.wgsl` (and `shaders/add.wgsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct RowParams {
    pub(crate) n: u32,
    /// swiglu.wgsl: 1 for GELU; add.wgsl: 1 to broadcast one delta row.
    pub(crate) mode: u32,
    pub(crate) _pad: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<RowParams>() == 16);

/// Invocations per workgroup of the elementwise kernels (swiglu.wgsl, add.wgsl).
pub(crate) const ELEMENTWISE_WG: u64 = 256;

/// `out = act(gate) * up` over `[n_tokens, n]`, act = silu or GELU (tanh approximation).
#[derive(Debug, Clone)]
pub struct SwiGlu {
    pipeline: Pipeline,
}

/// An elementwise kernel bound to its buffers ([`SwiGlu`], [`super::Add`]).
#[derive(Debug, Clone)]
pub struct ElementwiseCall {
    bound: Bound,
    n: u32,
    max_tokens: u32,
    max_dim: u32,
}

/// [`SwiGlu`] bound to its buffers.
pub type SwiGluCall = ElementwiseCall;

impl SwiGlu {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let source = compose(&[shaders::COMMON, shaders::SWIGLU]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "swiglu", &source, &slots).await?;
        Ok(Self { pipeline })
    }

    /// SwiGLU: [`SwiGlu::bind_activation`] with silu.
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        n: u32,
        state: &wgpu::Buffer,
        gate: &wgpu::Buffer,
        up: &wgpu::Buffer,
        out: &wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<SwiGluCall> {
        let silu = FfnActivation::Silu;
        self.bind_activation(ctx, n, silu, state, gate, up, out, max_tokens)
    }

    /// * `gate`, `up`, `out`: `[max_tokens, n]` f32.
    #[allow(clippy::too_many_arguments)]
    pub fn bind_activation(
        &self,
        ctx: &GpuContext,
        n: u32,
        activation: FfnActivation,
        state: &wgpu::Buffer,
        gate: &wgpu::Buffer,
        up: &wgpu::Buffer,
        out: &wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<SwiGluCall> {
        let len = u64::from(max_tokens) * u64::from(n);
        check_buffer(ctx, "swiglu gate", gate, len)?;
        check_buffer(ctx, "swiglu up", up, len)?;
        check_buffer(ctx, "swiglu out", out, len)?;
        ElementwiseCall::new(
            ctx,
            &self.pipeline,
            "swiglu",
            n,
            u32::from(activation == FfnActivation::GeluTanh),
            max_tokens,
            &[state, gate, up, out],
        )
    }
}

impl ElementwiseCall {
    pub(crate) fn new(
        ctx: &GpuContext,
        pipeline: &Pipeline,
        what: &str,
        n: u32,
        mode: u32,
        max_tokens: u32,
        buffers: &[&wgpu::Buffer],
    ) -> Result<Self> {
        require(
            n > 0 && max_tokens > 0,
            &format!("{what}: n and max_tokens must be > 0"),
        )?;
        if let Some(state) = buffers.first() {
            check_buffer(ctx, what, *state, 4)?;
        }
        let len = u64::from(max_tokens) * u64::from(n);
        grid(len.div_ceil(ELEMENTWISE_WG), max_groups(ctx))?;
        let params = RowParams {
            n,
            mode,
            _pad: [0; 2],
        };
        Ok(Self {
            bound: pipeline.bind(ctx, &params, buffers)?,
            n,
            max_tokens,
            max_dim: max_groups(ctx),
        })
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        check_tokens("elementwise", n_tokens, self.max_tokens)?;
        let len = u64::from(n_tokens) * u64::from(self.n);
        let (x, y) = grid(len.div_ceil(ELEMENTWISE_WG), self.max_dim)?;
        self.bound.dispatch(pass, [x, y, 1]);
        Ok(())
    }
}
