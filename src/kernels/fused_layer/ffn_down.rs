//! Dispatch 4 of a layer: `fused_ffn_down` (down projection + residual).

use super::call::FusedCall;
use super::kv_cache::cache_res;
use super::lanes::lanes_for;
use super::limits::WORKGROUP;
use super::shape::FusedShape;
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::kernels::attention::KvFormat;
use crate::kernels::binding::BufferView;
use crate::kernels::checks::{check_buffer, require};
use crate::kernels::layer_indexing::LayerIndexing;
use crate::kernels::layer_indexing::{in_group, layer_grid, layer_prelude, weight_res};
use crate::kernels::pipeline::{compose, Pipeline, Slot};
use crate::kernels::weights::{GpuWeight, WeightFormat};
use crate::shaders;

/// Dispatch 4: `x = x_mid + W_down · hidden`, and (without QK_NORM) the step's K and V stored
/// into the KV cache, so that attention only reads it. Layer-indexed ([`LayerIndexing`]: the
/// weight and the KV caches), bindings in `@group(3)`.
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
        kv: KvFormat,
        ix: &LayerIndexing,
    ) -> Result<Self> {
        s.check()?;
        let lanes = lanes_for(s.n_ff / 8, WORKGROUP, s.tuning.lanes);
        let rpl = down_rows_per_lane(s, lanes);
        let x_base = layer_grid(
            ctx,
            "maxComputeWorkgroupsPerDimension (fused_ffn_down: row groups + layers)",
            s.n_embd.div_ceil(WORKGROUP / lanes * rpl),
            ix.n_layer,
        )?;
        let source = compose(&[
            &s.wgsl_prelude(ctx, kv.prelude(ctx)?, lanes),
            &format!("const RPL: u32 = {rpl}u;\n"),
            shaders::COMMON,
            &layer_prelude(ix, x_base, &[("w", down)], false),
            shaders::FUSED_FFN_DOWN,
        ]);
        let slots = [
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
            Slot::Read,
            Slot::ReadWrite,
            Slot::ReadWrite,
        ];
        let pipeline =
            Pipeline::new_in_group(ctx, "fused_ffn_down", &in_group(source, 3), &slots, 3).await?;
        Ok(Self {
            pipeline,
            shape: *s,
            ix: *ix,
            x_base,
        })
    }

    /// One layer's call (stacked W_down and KV caches: every layer's). `qkv`: fused_qkv's
    /// output; `k_cache`, `v_cache`: the layer's views.
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        state: &wgpu::Buffer,
        x_mid: &wgpu::Buffer,
        hidden: &wgpu::Buffer,
        down: &GpuWeight,
        x: &wgpu::Buffer,
        qkv: &wgpu::Buffer,
        k_cache: &BufferView,
        v_cache: &BufferView,
    ) -> Result<FusedCall> {
        let s = &self.shape;
        require(
            down.k == s.n_ff && down.n == s.n_embd,
            "fused_ffn_down: down must be [n_ff, n_embd]",
        )?;
        check_buffer(ctx, "fused_ffn_down x_mid", x_mid, u64::from(s.n_embd))?;
        check_buffer(ctx, "fused_ffn_down hidden", hidden, u64::from(s.n_ff))?;
        check_buffer(ctx, "fused_ffn_down x", x, s.residual_len())?;
        check_buffer(ctx, "fused_ffn_down qkv", qkv, u64::from(s.qkv_len()))?;
        let stacked = self.ix.shared(1, true);
        let buffers = [
            state.into(),
            x_mid.into(),
            hidden.into(),
            weight_res(ctx, down, stacked)?,
            x.into(),
            qkv.into(),
            cache_res(k_cache, stacked),
            cache_res(v_cache, stacked),
        ];
        Ok(FusedCall {
            bound: self.pipeline.bind_plain(ctx, &buffers)?,
            groups: [self.x_base, 1, 1],
        })
    }
}

/// Rows per lane of `fused_ffn_down` (`RPL`, 1 to 4): each lane's hidden values serve that many
/// rows, so the kernel loads the hidden vector n_embd / RPL times instead of n_embd times. Only
/// for a long hidden vector (n_ff >= 4096): on an H200 it took Llama-3.2-1B's down from 16.1 to
/// 14.4 µs, but at Gemma 3 270M's width (n_ff 2048, 640 rows) RPL 4 cost 4% of decode (fewer
/// workgroups than SMs; bench/results/wide-models-h200-2026-11-25). On a software adapter at
/// every width ([`FusedShape::software`](super::FusedShape::software)).
/// `KernelTuning::down_rows_per_lane` overrides it for measurements.
pub fn down_rows_per_lane(s: &FusedShape, lanes: u32) -> u32 {
    if let Some(r) = s.tuning.down_rows_per_lane {
        return r;
    }
    if s.n_ff < 4096 && !s.software {
        return 1;
    }
    // Each lane keeps PER_LANE × RPL weight units' words in registers: at most 16.
    let per_lane = (s.n_ff / 8).div_ceil(lanes);
    match per_lane {
        0..=4 => 4,
        5..=8 => 2,
        _ => 1,
    }
}
