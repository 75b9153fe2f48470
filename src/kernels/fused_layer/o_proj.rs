//! The attention output projection as a dispatch of its own: `fused_o_proj`, and when a step
//! uses it ([`o_split`]).

use super::call::FusedCall;
use super::lanes::lanes_for;
use super::limits::{PRECOMBINE_FLOATS, WORKGROUP};
use super::shape::FusedShape;
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::kernels::checks::{check_buffer, require};
use crate::kernels::layer_indexing::LayerIndexing;
use crate::kernels::layer_indexing::{in_group, layer_grid, layer_prelude, weight_res};
use crate::kernels::pipeline::{compose, Pipeline, Slot};
use crate::kernels::weights::{GpuWeight, WeightFormat};
use crate::shaders;

/// `x_mid = x + Wo · o` (o: the heads' normalised attention outputs that `fused_attention`
/// writes with `O_SPLIT`), for single-chunk steps of [`o_split`] models. Layer-indexed
/// ([`LayerIndexing`]: Wo), bindings in `@group(2)` (between attention's 1 and gate/up's 2,
/// whose bind group the next dispatch sets again).
#[derive(Debug, Clone)]
pub struct FusedOProj {
    pipeline: Pipeline,
    shape: FusedShape,
    ix: LayerIndexing,
    x_base: u32,
}

impl FusedOProj {
    pub async fn new(
        ctx: &GpuContext,
        s: &FusedShape,
        o: WeightFormat,
        ix: &LayerIndexing,
    ) -> Result<Self> {
        s.check()?;
        let (lanes, rpl) = o_proj_launch(s);
        let x_base = layer_grid(
            ctx,
            "maxComputeWorkgroupsPerDimension (fused_o_proj: row groups + layers)",
            s.n_embd.div_ceil(WORKGROUP / lanes * rpl),
            ix.n_layer,
        )?;
        let ix = LayerIndexing {
            kv_stride: 0,
            ..*ix
        };
        let source = compose(&[
            &s.wgsl_prelude(ctx, "", lanes),
            &format!("const RPL: u32 = {rpl}u;\n"),
            shaders::COMMON,
            &layer_prelude(&ix, x_base, &[("w", o)], false),
            shaders::FUSED_O_PROJ,
        ]);
        let slots = [
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline =
            Pipeline::new_in_group(ctx, "fused_o_proj", &in_group(source, 2), &slots, 2).await?;
        Ok(Self {
            pipeline,
            shape: *s,
            ix,
            x_base,
        })
    }

    /// One layer's call (stacked Wo: every layer's). `x`: the residual; `part`: attention's
    /// output.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        state: &wgpu::Buffer,
        x: &wgpu::Buffer,
        part: &wgpu::Buffer,
        wo: &GpuWeight,
        x_mid: &wgpu::Buffer,
    ) -> Result<FusedCall> {
        let s = &self.shape;
        require(
            wo.k == s.n_q() && wo.n == s.n_embd,
            "fused_o_proj: Wo must be [n_head * head_dim, n_embd]",
        )?;
        check_buffer(ctx, "fused_o_proj x", x, u64::from(s.n_embd))?;
        check_buffer(ctx, "fused_o_proj part", part, u64::from(s.n_q()))?;
        check_buffer(ctx, "fused_o_proj x_mid", x_mid, u64::from(s.n_embd))?;
        let stacked = self.ix.shared(1, false);
        let buffers = [
            state.into(),
            x.into(),
            part.into(),
            weight_res(ctx, wo, stacked)?,
            x_mid.into(),
        ];
        Ok(FusedCall {
            bound: self.pipeline.bind_plain(ctx, &buffers)?,
            groups: [self.x_base, 1, 1],
        })
    }
}

/// Lanes per row and rows per lane of `fused_o_proj`: 128 × 4 by default (Phi-3-mini: 3,072
/// columns are 3 units per lane, 8 rows per workgroup, 384 workgroups);
/// `KernelTuning::o_lanes` and `o_rows_per_lane` override them for measurements.
pub fn o_proj_launch(s: &FusedShape) -> (u32, u32) {
    let lanes = lanes_for(
        s.n_q() / 8,
        WORKGROUP,
        Some(s.tuning.o_lanes.unwrap_or(128)),
    );
    (lanes, s.tuning.o_rows_per_lane.unwrap_or(4))
}

/// Whether a step that fits one attention chunk projects the attention output in
/// `fused_o_proj` (attention then only writes the heads' outputs, and gate/up reads x_mid)
/// instead of inside `fused_attention`. Where `fused_ffn_up` would split its combine off at
/// one chunk (`ffn_up_precombine`'s rule: the partials of every head are large), the projection
/// inside attention is the bottleneck: at Phi-3-mini's shape 192 workgroups each stream one
/// head's columns of a 512-row block of Wo in 16 serial passes (925 µs of a 3.65 ms step on an
/// H200, ~0.2 TB/s). Never with post-attention norms (the norm needs the projected output
/// whole, which `fused_ffn_up` computes) or an output bias. Longer contexts keep the
/// projection in attention (its partials per chunk are merged by `fused_ffn_up`).
/// `KernelTuning::o_split` (0: never, 1: wherever allowed) overrides it.
pub fn o_split(s: &FusedShape) -> bool {
    if s.arch.post_norms || s.arch.o_bias {
        return false;
    }
    match s.tuning.o_split {
        Some(v) => v == 1,
        None => {
            let partials = u64::from(s.n_head / s.attention_heads_per_group());
            partials * u64::from(s.n_embd) >= PRECOMBINE_FLOATS
        }
    }
}
