//! Decode matrix-vector product against a weight in its ggml format.

use super::checks::{check_buffer, require};
use super::dispatch::{grid, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use super::weights::{GpuWeight, WeightFormat};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Mirrors `Params` in `shaders/matvec.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct MatVecParams {
    k: u32,
    n_rows: u32,
    row0: u32,
    _pad: u32,
}
const _: () = assert!(std::mem::size_of::<MatVecParams>() == 16);

/// Output rows per workgroup of 256 (32 lanes per row); mirrors `ROWS` in `matvec.wgsl`.
pub const ROWS_PER_WORKGROUP: u32 = 8;

/// `y[r] = sum_c W[r][c] x[c]` for a `[k, n]` weight (one token), f32 accumulation;
/// [`ROWS_PER_WORKGROUP`] rows per workgroup. One pipeline per weight format.
#[derive(Debug, Clone)]
pub struct MatVec {
    pipeline: Pipeline,
    format: WeightFormat,
}

/// [`MatVec`] bound to a weight, `x` and `y`: one dispatch per weight chunk.
#[derive(Debug, Clone)]
pub struct MatVecCall {
    chunks: Vec<(Bound, [u32; 3])>,
}

impl MatVec {
    pub async fn new(ctx: &GpuContext, format: WeightFormat) -> Result<Self> {
        let source = compose(&[shaders::COMMON, format.decoder(), shaders::MATVEC]);
        let slots = [Slot::Uniform, Slot::Read, Slot::Read, Slot::ReadWrite];
        let pipeline = Pipeline::new(ctx, "matvec", &source, &slots).await?;
        Ok(Self { pipeline, format })
    }

    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// * `w`: `[k, n]` weight in this kernel's format; `x`: `[k]` f32; `y`: `[n]` f32.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        w: &GpuWeight,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
    ) -> Result<MatVecCall> {
        require(
            w.format == self.format,
            "matvec: weight format differs from the kernel's",
        )?;
        check_buffer(ctx, "matvec x", x, u64::from(w.k))?;
        check_buffer(ctx, "matvec y", y, u64::from(w.n))?;
        let chunks = w
            .chunks()
            .iter()
            .map(|c| {
                let params = MatVecParams {
                    k: w.k,
                    n_rows: c.rows,
                    row0: c.row0,
                    _pad: 0,
                };
                let groups = u64::from(c.rows.div_ceil(ROWS_PER_WORKGROUP));
                let (gx, gy) = grid(groups, max_groups(ctx))?;
                Ok((
                    self.pipeline
                        .bind(ctx, &params, &[c.binding(), x.into(), y.into()])?,
                    [gx, gy, 1],
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(MatVecCall { chunks })
    }
}

impl MatVecCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        for (bound, groups) in &self.chunks {
            bound.dispatch(pass, *groups);
        }
    }
}
