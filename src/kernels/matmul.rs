//! Prefill matrix product (many tokens) against a weight in its ggml format.

use super::checks::{check_buffer, check_tokens, require};
use super::dispatch::{check_dim, grid, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use super::weights::{GpuWeight, WeightFormat};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Mirrors `Params` in `shaders/matmul_io.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct MatMulParams {
    k: u32,
    n_rows: u32,
    row0: u32,
    n: u32,
}
const _: () = assert!(std::mem::size_of::<MatMulParams>() == 16);

/// Tokens per workgroup tile in matmul.wgsl (`TOKENS`).
pub const TOKENS_PER_WORKGROUP: u32 = 32;
/// Weight rows per workgroup tile in matmul.wgsl (`ROWS`).
pub const ROWS_PER_WORKGROUP: u32 = 32;
/// Tokens and weight rows per workgroup tile in matmul_wide.wgsl (`TOKENS`, `ROWS`).
pub const WIDE_TOKENS: u32 = 64;
pub const WIDE_ROWS: u32 = 64;
/// Weight rows and tokens per workgroup tile in matmul_coop.wgsl (`ROWS`, `TOKENS`).
pub const COOP_ROWS: u32 = 32;
pub const COOP_TOKENS: u32 = 64;
/// Workgroup memory of matmul_coop.wgsl: its W and X halves, the slab's output tile and the
/// exponents (2 x 2 x 4,608 + 2 x 2 x 2,304 + 4 x 2,048 + 4 x 192 bytes).
pub const COOP_WORKGROUP_BYTES: u32 = 36_608;
/// The directives matmul_coop.wgsl needs, first in its module.
const COOP_ENABLES: &str = "enable f16;\nenable wgpu_cooperative_matrix;";
/// A weight chunk's product uses matmul_wide.wgsl where its 64 x 64 tiles number at least this
/// many (`KernelTuning::matmul_wide_from` overrides it): below, the 32 x 32 tiles' four times as
/// many workgroups keep more of the GPU busy. Measured in bench/NOTES.md ("Prefill kernels").
pub const WIDE_FROM_GROUPS: u32 = 256;

/// `Y[t][r] = sum_c W[r][c] X[t][c]` for `t < state.n_tokens`: `X [n_tokens, k] · W^T`.
/// A tiled GEMM: each workgroup computes 32 rows x 32 tokens, decoding every weight unit of
/// its rows once into workgroup memory (design in `shaders/matmul.wgsl`); a product that makes
/// at least [`WIDE_FROM_GROUPS`] tiles of 64 x 64 uses those with 4 x 4 outer products per invocation
/// (`shaders/matmul_wide.wgsl`, compiled only where a product can make that many:
/// [`MatMul::for_products`]). Where the device has cooperative matrices
/// ([`GpuContext::coop_matrix_f16`]), every product runs on them instead
/// (`shaders/matmul_coop.wgsl`: 32 rows x 64 tokens a workgroup, each value split into two f16
/// halves so that the result is f32's; opt-in with `KernelTuning::matmul_coop` 1).
#[derive(Debug, Clone)]
pub struct MatMul {
    pipeline: Pipeline,
    /// `None` where no product the kernel was made for makes [`MatMul::wide_from`] wide tiles.
    wide: Option<Pipeline>,
    /// The cooperative-matrix tile, where the device and the format allow it.
    coop: Option<Pipeline>,
    format: WeightFormat,
}

/// A bound tile kernel and its (folded) row-tile grid.
type TileCall = (Bound, (u32, u32));

/// [`MatMul`] bound to a weight and buffers: one dispatch per weight chunk.
#[derive(Debug, Clone)]
pub struct MatMulCall {
    /// Per weight chunk: the 32 x 32 tile's call and grid, the 64 x 64 tile's (where compiled),
    /// the cooperative-matrix tile's (where compiled; it then runs every product), the rows.
    chunks: Vec<(TileCall, Option<TileCall>, Option<TileCall>, u32)>,
    max_tokens: u32,
    max_dim: u32,
    /// A chunk whose wide tiles number at least this many uses them (0: never).
    wide_from: u32,
}

impl MatMul {
    /// Both tile kernels for weights of `format`.
    pub async fn new(ctx: &GpuContext, format: WeightFormat) -> Result<Self> {
        Self::for_products(ctx, format, u32::MAX, u32::MAX).await
    }

    /// [`MatMul::new`] for weights of at most `max_rows` rows and batches of at most
    /// `max_tokens`: the wide kernel is compiled only where such a product makes
    /// [`MatMul::wide_from`] tiles (each pipeline is a compile at every model load).
    pub async fn for_products(
        ctx: &GpuContext,
        format: WeightFormat,
        max_rows: u32,
        max_tokens: u32,
    ) -> Result<Self> {
        let source = compose(&[
            shaders::COMMON,
            format.decoder(),
            shaders::MATMUL_IO,
            shaders::MATMUL,
        ]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "matmul", &source, &slots).await?;
        let coop = if Self::coop_for(ctx, format) {
            let source = Self::coop_source(format);
            Some(Pipeline::new(ctx, "matmul_coop", &source, &slots).await?)
        } else {
            None
        };
        let from = Self::wide_from(ctx);
        let most =
            u64::from(max_rows.div_ceil(WIDE_ROWS)) * u64::from(max_tokens.div_ceil(WIDE_TOKENS));
        let wide = if coop.is_none() && from > 0 && most >= u64::from(from) {
            let source = compose(&[
                shaders::COMMON,
                format.decoder(),
                shaders::MATMUL_IO,
                shaders::MATMUL_WIDE,
            ]);
            Some(Pipeline::new(ctx, "matmul_wide", &source, &slots).await?)
        } else {
            None
        };
        Ok(Self {
            pipeline,
            wide,
            coop,
            format,
        })
    }

    pub fn format(&self) -> WeightFormat {
        self.format
    }

    /// Whether `ctx`'s products run on cooperative matrices (where their format allows): the
    /// tuning asks for them (opt-in: SmolLM2's prefill 2.5–2.8x slower than on the SIMT tiles
    /// as built, on an H200: bench/NOTES.md "Tensor cores for prefill") and the device has them
    /// ([`GpuContext::coop_matrix_f16`]) with [`COOP_WORKGROUP_BYTES`] of workgroup memory.
    pub fn coop_enabled(ctx: &GpuContext) -> bool {
        ctx.tuning().matmul_coop == Some(1)
            && ctx.coop_matrix_f16()
            && ctx.device.limits().max_compute_workgroup_storage_size >= COOP_WORKGROUP_BYTES
    }

    /// [`MatMul::coop_enabled`] for weights of `format`: not F32 or BF16 (kept on the SIMT
    /// tiles).
    fn coop_for(ctx: &GpuContext, format: WeightFormat) -> bool {
        !matches!(format, WeightFormat::F32 | WeightFormat::BF16) && Self::coop_enabled(ctx)
    }

    /// The cooperative-matrix tile's WGSL for weights of `format` (tests/loop_proof.rs proves
    /// its loops on machines without cooperative matrices).
    pub fn coop_source(format: WeightFormat) -> String {
        compose(&[
            COOP_ENABLES,
            shaders::COMMON,
            format.decoder(),
            shaders::MATMUL_IO,
            shaders::MATMUL_COOP,
        ])
    }

    /// Whether this kernel's products run on cooperative matrices.
    pub fn uses_coop(&self) -> bool {
        self.coop.is_some()
    }

    /// A product whose wide tiles number at least this many uses them (0: never): the
    /// context's tuning, else [`WIDE_FROM_GROUPS`].
    fn wide_from(ctx: &GpuContext) -> u32 {
        ctx.tuning().matmul_wide_from.unwrap_or(WIDE_FROM_GROUPS)
    }

    /// * `w`: `[k, n]` weight; `x`: `[max_tokens, k]` f32; `y`: `[max_tokens, n]` f32.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        w: &GpuWeight,
        state: &wgpu::Buffer,
        x: &wgpu::Buffer,
        y: &wgpu::Buffer,
        max_tokens: u32,
    ) -> Result<MatMulCall> {
        require(
            w.format == self.format,
            "matmul: weight format differs from the kernel's",
        )?;
        require(max_tokens > 0, "matmul: max_tokens must be > 0")?;
        let t = u64::from(max_tokens);
        check_buffer(ctx, "matmul state", state, 4)?;
        check_buffer(ctx, "matmul x", x, t * u64::from(w.k))?;
        check_buffer(ctx, "matmul y", y, t * u64::from(w.n))?;
        let chunks = w
            .chunks()
            .iter()
            .map(|c| {
                let params = MatMulParams {
                    k: w.k,
                    n_rows: c.rows,
                    row0: c.row0,
                    n: w.n,
                };
                let buffers = [state.into(), c.binding(), x.into(), y.into()];
                let tile = |rows: u32| grid(u64::from(c.rows.div_ceil(rows)), max_groups(ctx));
                let wide = match &self.wide {
                    Some(p) => Some((p.bind(ctx, &params, &buffers)?, tile(WIDE_ROWS)?)),
                    None => None,
                };
                let coop = match &self.coop {
                    Some(p) => Some((p.bind(ctx, &params, &buffers)?, tile(COOP_ROWS)?)),
                    None => None,
                };
                Ok((
                    (
                        self.pipeline.bind(ctx, &params, &buffers)?,
                        tile(ROWS_PER_WORKGROUP)?,
                    ),
                    wide,
                    coop,
                    c.rows,
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(MatMulCall {
            chunks,
            max_tokens,
            max_dim: max_groups(ctx),
            wide_from: Self::wide_from(ctx),
        })
    }
}

impl MatMulCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        check_tokens("matmul", n_tokens, self.max_tokens)?;
        let wide_z = n_tokens.div_ceil(WIDE_TOKENS);
        for (narrow, wide, coop, rows) in &self.chunks {
            let groups = u64::from(rows.div_ceil(WIDE_ROWS)) * u64::from(wide_z);
            let ((bound, (gx, gy)), tokens) = match (coop, wide) {
                (Some(call), _) => (call, COOP_TOKENS),
                (None, Some(call)) if self.wide_from > 0 && groups >= u64::from(self.wide_from) => {
                    (call, WIDE_TOKENS)
                }
                _ => (narrow, TOKENS_PER_WORKGROUP),
            };
            let z = check_dim(u64::from(n_tokens.div_ceil(tokens)), self.max_dim)?;
            bound.dispatch(pass, [*gx, *gy, z]);
        }
        Ok(())
    }
}
