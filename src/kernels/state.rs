//! The decode state: the per-step values every kernel reads from the GPU instead of a uniform.

use super::pipeline::{compose, Bound, Pipeline, Slot};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Contents of the 16-byte `state` storage buffer, mirrored by `struct State` in
/// `shaders/common.wgsl`.
///
/// * `pos`: position of this step's first token, i.e. how many tokens the KV cache already
///   holds. Embed reads `tokens[pos + t]`, rope rotates by `pos + t`, kv_store writes cache row
///   `pos + t`, attention attends to `0..=pos + t`, argmax writes `tokens[pos + n_tokens]`.
/// * `n_tokens`: tokens in this step — the prompt length for prefill, 1 for decode. Kernels
///   ignore grid cells past it.
///
/// The host writes it once before prefill (`{ pos: 0, n_tokens: prompt_len }`); after each
/// step [`Advance`] sets `pos += n_tokens; n_tokens = 1` on the GPU, so decode steps need no
/// CPU writes and can be recorded back to back in one compute pass.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct DecodeState {
    pub pos: u32,
    pub n_tokens: u32,
    /// 1 once the GPU sampler chose a stop token: the fused kernels of the remaining recorded
    /// steps return at once (no-ops), so a whole generation can be recorded up front.
    pub done: u32,
    /// Fused with a constraint: the constraint's DFA state (`kernels::constraint`); the
    /// megakernel: its error code (1: grid barrier broken, 2: timed out).
    pub aux: u32,
}
const _: () = assert!(std::mem::size_of::<DecodeState>() == 16);

impl DecodeState {
    pub fn new(pos: u32, n_tokens: u32) -> Self {
        Self {
            pos,
            n_tokens,
            done: 0,
            aux: 0,
        }
    }

    /// A `state` buffer (STORAGE | COPY_DST | COPY_SRC) holding `self`.
    pub fn create_buffer(&self, ctx: &GpuContext) -> wgpu::Buffer {
        ctx.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("fuselm decode state"),
            contents: bytemuck::bytes_of(self),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_DST
                | wgpu::BufferUsages::COPY_SRC,
        })
    }
}

/// Advances the state after a step: `pos += n_tokens; n_tokens = 1` (one invocation).
#[derive(Debug, Clone)]
pub struct Advance {
    pipeline: Pipeline,
}

/// [`Advance`] bound to a state buffer.
#[derive(Debug, Clone)]
pub struct AdvanceCall {
    bound: Bound,
}

impl Advance {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let source = compose(&[shaders::COMMON, shaders::ADVANCE]);
        let pipeline = Pipeline::new(ctx, "advance", &source, &[Slot::ReadWrite]).await?;
        Ok(Self { pipeline })
    }

    /// `state`: the 16-byte [`DecodeState`] buffer.
    pub fn bind(&self, ctx: &GpuContext, state: &wgpu::Buffer) -> Result<AdvanceCall> {
        super::checks::check_buffer(ctx, "advance state", state, 4)?;
        Ok(AdvanceCall {
            bound: self.pipeline.bind_plain(ctx, &[state])?,
        })
    }
}

impl AdvanceCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.dispatch(pass, [1, 1, 1]);
    }
}
