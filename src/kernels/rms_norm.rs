//! RMS normalisation with its weight.

use super::checks::{check_buffer, check_tokens, require};
use super::dispatch::{check_dim, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Mirrors `Params` in `shaders/rms_norm.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct RmsNormParams {
    n: u32,
    eps: f32,
    last_only: u32,
    rows_per_token: u32,
}
const _: () = assert!(std::mem::size_of::<RmsNormParams>() == 16);

/// Which rows a call normalises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RmsRows {
    /// Every token of the step: `out[t]` from `x[t]`.
    All,
    /// Only the step's last token (row `state.n_tokens - 1` of `x`), written to row 0 of
    /// `out`: the final norm before the output head.
    Last,
    /// `heads` rows of `n` values per token, each normalised by itself (per-head Q/K norms).
    PerHead(u32),
}

/// `out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight`, one workgroup per row.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    pipeline: Pipeline,
}

/// [`RmsNorm`] bound to its buffers.
#[derive(Debug, Clone)]
pub struct RmsNormCall {
    bound: Bound,
    rows: RmsRows,
    max_tokens: u32,
    max_dim: u32,
}

impl RmsNorm {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let source = compose(&[shaders::COMMON, shaders::RMS_NORM]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "rms_norm", &source, &slots).await?;
        Ok(Self { pipeline })
    }

    /// * `x`: `[max_tokens, n]`; `weight`: `[n]` f32;
    /// * `out`: `[max_tokens, n]`, or `[1, n]` for [`RmsRows::Last`].
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        n: u32,
        eps: f32,
        rows: RmsRows,
        state: &wgpu::Buffer,
        x: &wgpu::Buffer,
        weight: &wgpu::Buffer,
        out: &wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<RmsNormCall> {
        require(
            n > 0 && max_tokens > 0,
            "rms_norm: n and max_tokens must be > 0",
        )?;
        let per_token = match rows {
            RmsRows::PerHead(heads) => heads,
            _ => 1,
        };
        require(per_token > 0, "rms_norm: heads must be > 0")?;
        let out_rows = match rows {
            RmsRows::Last => 1,
            _ => u64::from(max_tokens) * u64::from(per_token),
        };
        let in_rows = u64::from(max_tokens) * u64::from(per_token);
        check_buffer(ctx, "rms_norm state", state, 4)?;
        check_buffer(ctx, "rms_norm x", x, in_rows * u64::from(n))?;
        check_buffer(ctx, "rms_norm weight", weight, u64::from(n))?;
        check_buffer(ctx, "rms_norm out", out, out_rows * u64::from(n))?;
        let params = RmsNormParams {
            n,
            eps,
            last_only: u32::from(rows == RmsRows::Last),
            rows_per_token: per_token,
        };
        Ok(RmsNormCall {
            bound: self.pipeline.bind(ctx, &params, &[state, x, weight, out])?,
            rows,
            max_tokens,
            max_dim: max_groups(ctx),
        })
    }
}

impl RmsNormCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        check_tokens("rms_norm", n_tokens, self.max_tokens)?;
        let groups = match self.rows {
            RmsRows::All => check_dim(u64::from(n_tokens), self.max_dim)?,
            RmsRows::PerHead(heads) => {
                check_dim(u64::from(n_tokens) * u64::from(heads), self.max_dim)?
            }
            RmsRows::Last => u32::from(n_tokens > 0),
        };
        self.bound.dispatch(pass, [groups, 1, 1]);
        Ok(())
    }
}
