//! In-place residual add.

use super::checks::check_buffer;
use super::pipeline::{compose, Pipeline, Slot};
use super::swiglu::ElementwiseCall;
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// `acc += delta` over `[n_tokens, n]` (the residual stream is updated in place).
#[derive(Debug, Clone)]
pub struct Add {
    pipeline: Pipeline,
}

/// [`Add`] bound to its buffers.
pub type AddCall = ElementwiseCall;

impl Add {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let source = compose(&[shaders::COMMON, shaders::ADD]);
        let slots = [Slot::Uniform, Slot::Read, Slot::Read, Slot::ReadWrite];
        let pipeline = Pipeline::new(ctx, "add", &source, &slots).await?;
        Ok(Self { pipeline })
    }

    /// * `delta` (read), `acc` (read_write): `[max_tokens, n]` f32; distinct buffers.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        n: u32,
        state: &wgpu::Buffer,
        delta: &wgpu::Buffer,
        acc: &wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<AddCall> {
        let len = u64::from(max_tokens) * u64::from(n);
        check_buffer(ctx, "add delta", delta, len)?;
        check_buffer(ctx, "add acc", acc, len)?;
        ElementwiseCall::new(
            ctx,
            &self.pipeline,
            "add",
            n,
            0,
            max_tokens,
            &[state, delta, acc],
        )
    }

    /// `acc[t] += bias` for every token: `bias` is `[n]`, `acc` `[max_tokens, n]`.
    pub fn bind_bias(
        &self,
        ctx: &GpuContext,
        n: u32,
        state: &wgpu::Buffer,
        bias: &wgpu::Buffer,
        acc: &wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<AddCall> {
        check_buffer(ctx, "add bias", bias, u64::from(n))?;
        check_buffer(ctx, "add acc", acc, u64::from(max_tokens) * u64::from(n))?;
        ElementwiseCall::new(
            ctx,
            &self.pipeline,
            "add bias",
            n,
            1,
            max_tokens,
            &[state, bias, acc],
        )
    }
}
