//! Dispatch 4 of a layer: `fused_ffn_down` (down projection + residual).

use super::{lanes_for, FusedCall, FusedShape, LayerIndexing, WORKGROUP};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::kernels::layer_indexing::{in_group, layer_grid, layer_prelude, weight_res};
use crate::kernels::weights::{GpuWeight, WeightFormat};
use crate::kernels::{check_buffer, compose, require, Pipeline, Slot};
use crate::shaders;

/// Dispatch 4: `x = x_mid + W_down · hidden`. Layer-indexed ([`LayerIndexing`]), bindings
/// in `@group(3)`.
#[derive(Debug, Clone)]
pub struct FusedFfnDown {
    pipeline: Pipeline,
    shape: FusedShape,
    ix: LayerIndexing,
    x_base: u32,
}

impl FusedFfnDown {
    pub async fn new(
        ctx: &GpuContext,
        s: &FusedShape,
        down: WeightFormat,
        ix: &LayerIndexing,
    ) -> Result<Self> {
        s.check()?;
        let lanes = lanes_for(s.n_ff / 8, WORKGROUP);
        let x_base = layer_grid(
            ctx,
            "maxComputeWorkgroupsPerDimension (fused_ffn_down: row groups + layers)",
            s.n_embd.div_ceil(WORKGROUP / lanes),
            ix.n_layer,
        )?;
        let source = compose(&[
            &s.wgsl_prelude(ctx, "", lanes),
            shaders::COMMON,
            &layer_prelude(ix, x_base, &[("w", down)], false),
            shaders::FUSED_FFN_DOWN,
        ]);
        let mut slots = vec![Slot::Read; 4];
        slots.push(Slot::ReadWrite);
        let pipeline =
            Pipeline::new_in_group(ctx, "fused_ffn_down", &in_group(source, 3), &slots, 3).await?;
        Ok(Self {
            pipeline,
            shape: *s,
            ix: *ix,
            x_base,
        })
    }

    /// One layer's call (stacked W_down: every layer's).
    pub fn bind(
        &self,
        ctx: &GpuContext,
        state: &wgpu::Buffer,
        x_mid: &wgpu::Buffer,
        hidden: &wgpu::Buffer,
        down: &GpuWeight,
        x: &wgpu::Buffer,
    ) -> Result<FusedCall> {
        let s = &self.shape;
        require(
            down.k == s.n_ff && down.n == s.n_embd,
            "fused_ffn_down: down must be [n_ff, n_embd]",
        )?;
        check_buffer(ctx, "fused_ffn_down x_mid", x_mid, u64::from(s.n_embd))?;
        check_buffer(ctx, "fused_ffn_down hidden", hidden, u64::from(s.n_ff))?;
        check_buffer(ctx, "fused_ffn_down x", x, s.residual_len())?;
        let buffers = [
            state.into(),
            x_mid.into(),
            hidden.into(),
            weight_res(ctx, down, self.ix.shared(1, false))?,
            x.into(),
        ];
        Ok(FusedCall {
            bound: self.pipeline.bind_plain(ctx, &buffers)?,
            groups: [self.x_base, 1, 1],
        })
    }
}
