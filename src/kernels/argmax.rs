//! Greedy sampling on the GPU.

use super::checks::{check_buffer, require};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Mirrors `Params` in `shaders/argmax.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ArgmaxParams {
    n_vocab: u32,
    _pad: [u32; 3],
}
const _: () = assert!(std::mem::size_of::<ArgmaxParams>() == 16);

/// Writes the index of the largest logit (ties: lowest index; NaN never chosen) to
/// `tokens[state.pos + state.n_tokens]`. One workgroup of 256.
#[derive(Debug, Clone)]
pub struct Argmax {
    pipeline: Pipeline,
}

/// [`Argmax`] bound to its buffers.
#[derive(Debug, Clone)]
pub struct ArgmaxCall {
    bound: Bound,
}

impl Argmax {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let source = compose(&[shaders::COMMON, shaders::ARGMAX]);
        let slots = [Slot::Uniform, Slot::Read, Slot::Read, Slot::ReadWrite];
        let pipeline = Pipeline::new(ctx, "argmax", &source, &slots).await?;
        Ok(Self { pipeline })
    }

    /// * `logits`: `[n_vocab]` f32 (the last token's); `tokens`: `[n_ctx]` u32 by position.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        n_vocab: u32,
        state: &wgpu::Buffer,
        logits: &wgpu::Buffer,
        tokens: &wgpu::Buffer,
    ) -> Result<ArgmaxCall> {
        require(n_vocab > 0, "argmax: n_vocab must be > 0")?;
        check_buffer(ctx, "argmax state", state, 4)?;
        check_buffer(ctx, "argmax logits", logits, u64::from(n_vocab))?;
        check_buffer(ctx, "argmax tokens", tokens, 1)?;
        let params = ArgmaxParams {
            n_vocab,
            _pad: [0; 3],
        };
        Ok(ArgmaxCall {
            bound: self.pipeline.bind(ctx, &params, &[state, logits, tokens])?,
        })
    }
}

impl ArgmaxCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.dispatch(pass, [1, 1, 1]);
    }
}
