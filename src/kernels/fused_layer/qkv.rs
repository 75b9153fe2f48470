//! Dispatch 1 of a layer: `fused_qkv` (RMS norm, Q/K/V projections, RoPE).

use super::call::FusedCall;
use super::lanes::lanes_for;
use super::limits::WORKGROUP;
use super::shape::{FusedShape, LayerAttention, LayerVectors};
use super::vectors::{check_vectors, flag_len, NO_VECTOR};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::kernels::checks::{check_buffer, require};
use crate::kernels::layer_indexing::LayerIndexing;
use crate::kernels::layer_indexing::{in_group, layer_grid, layer_prelude, weight_res};
use crate::kernels::pipeline::{compose, Pipeline, Slot};
use crate::kernels::weights::{GpuWeight, WeightFormat};
use crate::shaders;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QkvParams {
    theta_scale: f32,
    eps: f32,
    norm_off: u32,
    bias_off: u32,
    pf_off: u32,
    rope_off: u32,
    freq_scale: f32,
    mscale: f32,
}
const _: () = assert!(std::mem::size_of::<QkvParams>() == 32);

/// Dispatch 1: RMS norm + Q/K/V + RoPE → `qkv` (`[n_q + 2 n_kv]`). Layer-indexed
/// ([`LayerIndexing`]), bindings in `@group(0)`.
#[derive(Debug, Clone)]
pub struct FusedQkv {
    pipeline: Pipeline,
    shape: FusedShape,
    ix: LayerIndexing,
    x_base: u32,
}

/// Row passes per `fused_qkv` workgroup (`QPASS`): every workgroup loads x and the norm's
/// weights (n_embd floats each) and reduces sum(x^2) before its rows, so with one pass of two
/// rows on a 3072-wide model (Phi-3-mini) those loads are 6 times the weight bytes it streams.
/// Passes divide that over more rows, while enough workgroups remain to fill the GPU: the most
/// (up to 8) that leave at least 512 workgroups; 1 on small models, where the kernel is bound by
/// each workgroup's chain of dependent steps rather than by bytes, and 1 with several rows per
/// lane (`qkv_rows_per_lane`), which divide those loads instead. On a software adapter as many
/// passes as hold every row, up to 16: there a workgroup is CPU time of its own (SwiftShader
/// runs each of 256 invocations as a coroutine; see [`FusedShape::software`](super::FusedShape::software)).
/// `KernelTuning::qkv_passes` overrides it for measurements.
pub fn qkv_passes(s: &FusedShape, lanes: u32) -> u32 {
    if let Some(p) = s.tuning.qkv_passes {
        return p;
    }
    let rpl = qkv_rows_per_lane(s, lanes);
    if rpl > 1 {
        return 1;
    }
    let rows_per_pass = WORKGROUP / lanes;
    let rows = s.n_q() + 2 * s.n_kv();
    if s.software {
        return rows.div_ceil(rows_per_pass).clamp(1, 16);
    }
    (rows / (rows_per_pass * 512)).clamp(1, 8)
}

/// Rows each lane takes in a `fused_qkv` pass (`RPL`): its x and norm values serve them all,
/// their weight loads issue together and one reduction sums them. A pass's rows must lie in one
/// of Q, K and V (at most 8, so a head's rows are whole passes) with RoPE pairs adjacent (at
/// least 2 slots). Default: 2 where rows take 128 lanes (n_embd over 1,024), in one pass; on an
/// H200 that made decode 3.5% faster at Phi-3-mini's shape (314 → 325 tok/s), 1.6% at
/// Llama-3.2-3B's, 1.4% at Qwen2.5-1.5B's, the same at Llama-3.2-1B's, while at SmolLM2's (64
/// lanes) it cost 3%; 4 rows or 2 with 2 passes were slower everywhere
/// (bench/results/qkv-rows-per-lane-h200-2026-11-29). `KernelTuning::qkv_rows_per_lane`
/// overrides it.
pub fn qkv_rows_per_lane(s: &FusedShape, lanes: u32) -> u32 {
    let slots = WORKGROUP / lanes;
    let most = (8 / slots).max(1);
    let default = if lanes >= 128 { 2 } else { 1 };
    s.tuning.qkv_rows_per_lane.unwrap_or(default).min(most)
}

impl FusedQkv {
    pub async fn new(
        ctx: &GpuContext,
        s: &FusedShape,
        q: WeightFormat,
        k: WeightFormat,
        v: WeightFormat,
        ix: &LayerIndexing,
    ) -> Result<Self> {
        s.check()?;
        // At least 2 rows per workgroup: RoPE pairs rows within one.
        let lanes = lanes_for(s.n_embd / 8, WORKGROUP / 2, s.tuning.lanes);
        let rows = s.n_q() + 2 * s.n_kv();
        let passes = qkv_passes(s, lanes);
        let rpl = qkv_rows_per_lane(s, lanes);
        let x_base = layer_grid(
            ctx,
            "maxComputeWorkgroupsPerDimension (fused_qkv: row groups + layers)",
            rows.div_ceil(WORKGROUP / lanes * rpl * passes),
            ix.n_layer,
        )?;
        let source = compose(&[
            &s.wgsl_prelude(
                ctx,
                &format!("const QPASS: u32 = {passes}u;\nconst RPL: u32 = {rpl}u;\n"),
                lanes,
            ),
            shaders::COMMON,
            shaders::ROPE_MATH,
            &layer_prelude(ix, x_base, &[("wq", q), ("wk", k), ("wv", v)], true),
            &["wq", "wk", "wv"]
                .map(|w| shaders::FUSED_QKV_REGION.replace("{W}", w))
                .concat(),
            shaders::FUSED_QKV,
        ]);
        let mut slots = vec![Slot::Uniform];
        slots.extend([Slot::Read; 6]);
        slots.push(Slot::ReadWrite);
        let pipeline =
            Pipeline::new_in_group(ctx, "fused_qkv", &in_group(source, 0), &slots, 0).await?;
        Ok(Self {
            pipeline,
            shape: *s,
            ix: *ix,
            x_base,
        })
    }

    /// One layer's entry of the uniform array, checked against the vector arena.
    pub fn params(
        &self,
        ctx: &GpuContext,
        vecs: &wgpu::Buffer,
        layer: &LayerVectors,
        attention: &LayerAttention,
    ) -> Result<QkvParams> {
        let s = &self.shape;
        let pf_off = if s.arch.post_norms {
            layer.incoming_norm
        } else {
            NO_VECTOR
        };
        let params = QkvParams {
            theta_scale: s.theta_scale(attention.rope_freq_base),
            eps: s.eps,
            norm_off: layer.attn_norm,
            bias_off: layer.qkv_bias,
            pf_off,
            rope_off: layer.rope_factors,
            freq_scale: attention.rope_freq_scale,
            mscale: attention.rope_mscale,
        };
        check_vectors(
            ctx,
            vecs,
            &[
                (layer.attn_norm, s.n_embd),
                (
                    params.bias_off,
                    flag_len(s.arch.qkv_bias, s.n_q() + 2 * s.n_kv()),
                ),
                (pf_off, flag_len(pf_off != NO_VECTOR, s.n_embd)),
                (
                    layer.rope_factors,
                    flag_len(layer.rope_factors != NO_VECTOR, s.n_rot / 2),
                ),
            ],
        )?;
        Ok(params)
    }

    /// One layer's call (with stacked weights, every layer's: the bind group is the same).
    /// `params`: [`FusedQkv::params`] of every layer.
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        params: &wgpu::Buffer,
        state: &wgpu::Buffer,
        x: &wgpu::Buffer,
        vecs: &wgpu::Buffer,
        wq: &GpuWeight,
        wk: &GpuWeight,
        wv: &GpuWeight,
        qkv: &wgpu::Buffer,
    ) -> Result<FusedCall> {
        let s = &self.shape;
        for w in [wq, wk, wv] {
            require(
                w.k == s.n_embd,
                "fused_qkv: weight rows must have n_embd values",
            )?;
        }
        require(
            wq.n == s.n_q() && wk.n == s.n_kv() && wv.n == s.n_kv(),
            "fused_qkv: Q/K/V row counts differ from the head geometry",
        )?;
        check_buffer(ctx, "fused_qkv x", x, s.residual_len())?;
        check_buffer(ctx, "fused_qkv qkv", qkv, u64::from(s.qkv_len()))?;
        let stacked = self.ix.shared(3, false);
        let buffers = [
            state.into(),
            x.into(),
            vecs.into(),
            weight_res(ctx, wq, stacked)?,
            weight_res(ctx, wk, stacked)?,
            weight_res(ctx, wv, stacked)?,
            qkv.into(),
        ];
        Ok(FusedCall {
            bound: self.pipeline.bind_with_uniform(ctx, params, &buffers)?,
            groups: [self.x_base, 1, 1],
        })
    }
}
