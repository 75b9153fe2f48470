//! Token embedding lookup from a (possibly quantized, possibly chunked) table.

use super::checks::{check_buffer, check_tokens, require};
use super::dispatch::{check_dim, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use super::weights::{GpuWeight, WeightFormat};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Mirrors `Params` in `shaders/embed.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct EmbedParams {
    k: u32,
    n_rows: u32,
    row0: u32,
    scale: f32,
}
const _: () = assert!(std::mem::size_of::<EmbedParams>() == 16);

/// Invocations per workgroup in embed.wgsl; each decodes 8 values.
const WG: u64 = 64;

/// `out[t] = table[tokens[state.pos + t]]` (f32) for `t < state.n_tokens`, one pipeline per
/// table format.
#[derive(Debug, Clone)]
pub struct Embed {
    pipeline: Pipeline,
    format: WeightFormat,
}

/// [`Embed`] bound to a table and buffers: one dispatch per table chunk.
#[derive(Debug, Clone)]
pub struct EmbedCall {
    chunks: Vec<Bound>,
    groups_x: u32,
    max_tokens: u32,
    max_dim: u32,
}

impl Embed {
    pub async fn new(ctx: &GpuContext, format: WeightFormat) -> Result<Self> {
        let source = compose(&[shaders::COMMON, format.decoder(), shaders::EMBED]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "embed", &source, &slots).await?;
        Ok(Self { pipeline, format })
    }

    /// * `table`: `[n_embd, n_vocab]` weight in this kernel's format.
    /// * `state`: the [`super::DecodeState`] buffer; `tokens`: `[n_ctx]` u32 ids by position.
    /// * `out`: `[max_tokens, n_embd]` f32.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        table: &GpuWeight,
        state: &wgpu::Buffer,
        tokens: &wgpu::Buffer,
        out: &wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<EmbedCall> {
        self.bind_scaled(ctx, table, 1.0, state, tokens, out, max_tokens)
    }

    /// [`Embed::bind`] with every value multiplied by `scale` (gemma's sqrt(n_embd)).
    #[allow(clippy::too_many_arguments)]
    pub fn bind_scaled(
        &self,
        ctx: &GpuContext,
        table: &GpuWeight,
        scale: f32,
        state: &wgpu::Buffer,
        tokens: &wgpu::Buffer,
        out: &wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<EmbedCall> {
        require(
            table.format == self.format,
            "embed: table format differs from the kernel's",
        )?;
        require(max_tokens > 0, "embed: max_tokens must be > 0")?;
        check_buffer(ctx, "embed state", state, 4)?;
        check_buffer(ctx, "embed tokens", tokens, 1)?;
        check_buffer(
            ctx,
            "embed out",
            out,
            u64::from(max_tokens) * u64::from(table.k),
        )?;
        let groups_x = check_dim(u64::from(table.k).div_ceil(8).div_ceil(WG), max_groups(ctx))?;
        let chunks = table
            .chunks()
            .iter()
            .map(|c| {
                let params = EmbedParams {
                    k: table.k,
                    n_rows: c.rows,
                    row0: c.row0,
                    scale,
                };
                self.pipeline.bind(
                    ctx,
                    &params,
                    &[state.into(), tokens.into(), c.binding(), out.into()],
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(EmbedCall {
            chunks,
            groups_x,
            max_tokens,
            max_dim: max_groups(ctx),
        })
    }
}

impl EmbedCall {
    /// Records the lookup of `n_tokens` tokens (must equal `state.n_tokens` when it runs).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        check_tokens("embed", n_tokens, self.max_tokens)?;
        let y = check_dim(u64::from(n_tokens), self.max_dim)?;
        for chunk in &self.chunks {
            chunk.dispatch(pass, [self.groups_x, y, 1]);
        }
        Ok(())
    }
}
