//! Dispatch 3 of a layer: `fused_ffn_up` (attention combine + residual, RMS norm, gate/up,
//! SwiGLU), and its row passes per workgroup.

use super::lanes::lanes_for;
use super::limits::{single_chunk, PRECOMBINE_FLOATS, WORKGROUP};
use super::o_proj::o_split;
use super::shape::{FusedShape, LayerVectors};
use super::vectors::{check_vectors, flag_len, NO_VECTOR};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::kernels::checks::{check_buffer, require};
use crate::kernels::layer_indexing::LayerIndexing;
use crate::kernels::layer_indexing::{in_group, layer_grid, layer_prelude, weight_res};
use crate::kernels::pipeline::{compose, Bound, PassState, Pipeline, Slot};
use crate::kernels::weights::{GpuWeight, WeightFormat};
use crate::shaders;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct FfnUpParams {
    eps: f32,
    norm_off: u32,
    pa_off: u32,
    pf_off: u32,
    bo_off: u32,
    _pad: [u32; 3],
}
const _: () = assert!(std::mem::size_of::<FfnUpParams>() == 32);

/// Dispatch 3: combine + residual → `x_mid`; RMS norm, gate/up, SwiGLU → `hidden`. Two
/// pipelines: for steps whose context fits one attention chunk, and for any step. Where the
/// attention partials are large ([`ffn_up_precombine`]), three more that split it in two
/// dispatches: the combine alone (per chunking) and gate/up reading `x_mid`.
/// Layer-indexed ([`LayerIndexing`]), bindings in `@group(2)`.
#[derive(Debug, Clone)]
pub struct FusedFfnUp {
    single: Pipeline,
    general: Pipeline,
    split: Option<SplitPipelines>,
    /// [`o_split`] models: gate/up from the `x_mid` that `fused_o_proj` wrote (MODE 2), for
    /// single-chunk steps.
    after_o_proj: Option<Pipeline>,
    shape: FusedShape,
    ix: LayerIndexing,
    x_base: u32,
}

/// The combine (MODE 1, single-chunk and general) and gate/up from `x_mid` (MODE 2).
#[derive(Debug, Clone)]
struct SplitPipelines {
    combine_single: Pipeline,
    combine_general: Pipeline,
    up: Pipeline,
    combine_x_base: u32,
}

/// [`FusedFfnUp`] bound; the variant is chosen at record time from the steps' context.
#[derive(Debug, Clone)]
pub struct FusedFfnUpCall {
    single: Bound,
    general: Bound,
    split: Option<SplitCall>,
    after_o_proj: Option<Bound>,
    groups: [u32; 3],
}

#[derive(Debug, Clone)]
struct SplitCall {
    combine_single: Bound,
    combine_general: Bound,
    up: Bound,
    combine_groups: [u32; 3],
    /// [`ffn_up_precombine`] at one chunk, and the fewest chunks from which it holds beyond
    /// (`u32::MAX`: never), evaluated once at bind time.
    at_single: bool,
    from_chunks: u32,
}

impl SplitCall {
    fn applies(&self, max_len: u32) -> bool {
        if single_chunk(max_len) {
            self.at_single
        } else {
            max_len.div_ceil(super::limits::ATTENTION_CHUNK) >= self.from_chunks
        }
    }
}

impl FusedFfnUpCall {
    /// The dispatches of layer `layer` for a step that sees at most `max_len` positions: one,
    /// or the combine and then gate/up. Runs per layer and step while recording (the browser's
    /// host cost), so the rule was evaluated at bind time and nothing is allocated here.
    fn pick(&self, layer: u32, max_len: u32) -> [Option<(&Bound, [u32; 3])>; 2] {
        let single = single_chunk(max_len);
        let at = |[x, y, z]: [u32; 3]| [x + layer, y, z];
        if let (Some(up), true) = (&self.after_o_proj, single) {
            return [Some((up, at(self.groups))), None];
        }
        match &self.split {
            Some(split) if split.applies(max_len) => {
                let combine = if single {
                    &split.combine_single
                } else {
                    &split.combine_general
                };
                [
                    Some((combine, at(split.combine_groups))),
                    Some((&split.up, at(self.groups))),
                ]
            }
            _ => {
                let bound = if single { &self.single } else { &self.general };
                [Some((bound, at(self.groups))), None]
            }
        }
    }

    /// Dispatches per layer for a step that sees at most `max_len` positions (1, or 2 where
    /// the combine is split off).
    pub fn dispatches(&self, max_len: u32) -> u32 {
        self.pick(0, max_len).iter().flatten().count() as u32
    }

    /// Records layer `layer`'s combine + FFN-up for a step that sees at most `max_len`
    /// positions.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, layer: u32, max_len: u32) {
        for (bound, groups) in self.pick(layer, max_len).into_iter().flatten() {
            bound.dispatch(pass, groups);
        }
    }

    /// [`FusedFfnUpCall::record`], setting only what `state` says is not set.
    pub(crate) fn record_layer<'a>(
        &'a self,
        pass: &mut wgpu::ComputePass<'_>,
        state: &mut PassState<'a>,
        layer: u32,
        max_len: u32,
    ) {
        for (bound, groups) in self.pick(layer, max_len).into_iter().flatten() {
            bound.dispatch_tracked(pass, state, groups);
        }
    }
}

impl FusedFfnUp {
    pub async fn new(
        ctx: &GpuContext,
        s: &FusedShape,
        gate: WeightFormat,
        up: WeightFormat,
        ix: &LayerIndexing,
    ) -> Result<Self> {
        s.check_device(ctx)?;
        let lanes = ffn_up_lanes(s);
        let passes = ffn_up_passes(s);
        let x_base = layer_grid(
            ctx,
            "maxComputeWorkgroupsPerDimension (fused_ffn_up: row groups + layers)",
            s.n_ff.div_ceil(WORKGROUP / lanes * passes),
            ix.n_layer,
        )?;
        let mut slots = vec![Slot::Uniform];
        slots.extend([Slot::Read; 6]);
        slots.extend([Slot::ReadWrite; 2]);
        let source = |single: bool, mode: u32, base: u32| {
            in_group(
                compose(&[
                    &s.wgsl_prelude(ctx, "", lanes),
                    &format!(
                        "const SINGLE_CHUNK: bool = {single};\nconst RPASS: u32 = {passes}u;\nconst MODE: u32 = {mode}u;\n"
                    ),
                    shaders::COMMON,
                    &layer_prelude(ix, base, &[("wgate", gate), ("wup", up)], true),
                    shaders::FUSED_FFN_UP,
                ]),
                2,
            )
        };
        let slots = &slots;
        let pipeline = |single, mode, base| {
            let source = source(single, mode, base);
            async move { Pipeline::new_in_group(ctx, "fused_ffn_up", &source, slots, 2).await }
        };
        let single = pipeline(true, 0, x_base).await?;
        let general = pipeline(false, 0, x_base).await?;
        let split = if ffn_up_precombine(s, s.n_ctx) {
            let combine_x_base = layer_grid(
                ctx,
                "maxComputeWorkgroupsPerDimension (fused_ffn_up combine + layers)",
                (s.n_embd / 4).div_ceil(WORKGROUP),
                ix.n_layer,
            )?;
            Some(SplitPipelines {
                combine_single: pipeline(true, 1, combine_x_base).await?,
                combine_general: pipeline(false, 1, combine_x_base).await?,
                up: pipeline(true, 2, x_base).await?,
                combine_x_base,
            })
        } else {
            None
        };
        let after_o_proj = if o_split(s) {
            Some(match &split {
                Some(sp) => sp.up.clone(),
                None => pipeline(true, 2, x_base).await?,
            })
        } else {
            None
        };
        Ok(Self {
            single,
            general,
            split,
            after_o_proj,
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
    ) -> Result<FfnUpParams> {
        let s = &self.shape;
        let pf_off = if s.arch.post_norms {
            layer.incoming_norm
        } else {
            NO_VECTOR
        };
        let e = s.n_embd;
        check_vectors(
            ctx,
            vecs,
            &[
                (layer.ffn_norm, e),
                (layer.post_attn_norm, flag_len(s.arch.post_norms, e)),
                (pf_off, flag_len(pf_off != NO_VECTOR, e)),
                (layer.o_bias, flag_len(s.arch.o_bias, e)),
            ],
        )?;
        Ok(FfnUpParams {
            eps: s.eps,
            norm_off: layer.ffn_norm,
            pa_off: layer.post_attn_norm,
            pf_off,
            bo_off: layer.o_bias,
            _pad: [0; 3],
        })
    }

    /// One layer's call (stacked gate and up: every layer's). `params`:
    /// [`FusedFfnUp::params`] of every layer.
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        params: &wgpu::Buffer,
        state: &wgpu::Buffer,
        x: &wgpu::Buffer,
        part: &wgpu::Buffer,
        vecs: &wgpu::Buffer,
        gate: &GpuWeight,
        up: &GpuWeight,
        x_mid: &wgpu::Buffer,
        hidden: &wgpu::Buffer,
    ) -> Result<FusedFfnUpCall> {
        let s = &self.shape;
        require(
            gate.k == s.n_embd && up.k == s.n_embd && gate.n == s.n_ff && up.n == s.n_ff,
            "fused_ffn_up: gate/up must be [n_embd, n_ff]",
        )?;
        check_buffer(ctx, "fused_ffn_up x", x, s.residual_len())?;
        check_buffer(ctx, "fused_ffn_up part", part, s.partials_len())?;
        check_buffer(ctx, "fused_ffn_up hidden", hidden, u64::from(s.n_ff))?;
        check_buffer(ctx, "fused_ffn_up x_mid", x_mid, u64::from(s.n_embd))?;
        let stacked = self.ix.shared(2, false);
        let buffers = [
            state.into(),
            x.into(),
            part.into(),
            vecs.into(),
            weight_res(ctx, gate, stacked)?,
            weight_res(ctx, up, stacked)?,
            x_mid.into(),
            hidden.into(),
        ];
        let split = match &self.split {
            Some(sp) => Some(SplitCall {
                combine_single: sp.combine_single.bind_with_uniform(ctx, params, &buffers)?,
                combine_general: sp
                    .combine_general
                    .bind_with_uniform(ctx, params, &buffers)?,
                up: sp.up.bind_with_uniform(ctx, params, &buffers)?,
                combine_groups: [sp.combine_x_base, 1, 1],
                at_single: ffn_up_precombine(&self.shape, 1),
                // The partials grow with the chunks, so the rule holds from some count on.
                from_chunks: (2..=self.shape.max_chunks().max(2))
                    .find(|&c| ffn_up_precombine(&self.shape, c * super::limits::ATTENTION_CHUNK))
                    .unwrap_or(u32::MAX),
            }),
            None => None,
        };
        let after_o_proj = match &self.after_o_proj {
            Some(p) => Some(p.bind_with_uniform(ctx, params, &buffers)?),
            None => None,
        };
        Ok(FusedFfnUpCall {
            after_o_proj,
            single: self.single.bind_with_uniform(ctx, params, &buffers)?,
            general: self.general.bind_with_uniform(ctx, params, &buffers)?,
            split,
            groups: [self.x_base, 1, 1],
        })
    }
}

/// Lanes per row of `fused_ffn_up`: [`lanes_for`]'s rule, at most [`FFN_UP_MAX_LANES`]. With
/// RPASS passes every workgroup already holds many rows, so fewer lanes per row leave each lane
/// more units of x_mid and of the weights in flight. Measured on an H200 (2026-11-27,
/// bench/results/deployment-shapes-h200-2026-11-27): 64 instead of 128–256 lanes cut the
/// gate/up dispatch by 11–19% at Phi-3-mini's shape (1,300 → 1,077 µs a step), Llama-3.2-3B's
/// (1,131 → 948), Gemma 3 1B's (947 → 766) and Qwen2.5-1.5B's (739 → 655), and left
/// Llama-3.2-1B's (405 → 390) and SmolLM2's (already 64) as they were. `KernelTuning::up_lanes`
/// (or `lanes`) overrides it for measurements.
pub fn ffn_up_lanes(s: &FusedShape) -> u32 {
    match s.tuning.up_lanes.or(s.tuning.lanes) {
        Some(l) => lanes_for(s.n_embd / 8, WORKGROUP, Some(l)),
        None => lanes_for(s.n_embd / 8, FFN_UP_MAX_LANES, None),
    }
}

/// Most lanes per row of `fused_ffn_up` by default ([`ffn_up_lanes`]).
pub const FFN_UP_MAX_LANES: u32 = 64;

/// Row passes per workgroup of `fused_ffn_up` (`RPASS`): every workgroup first rebuilds the
/// residual from the attention partials of `n_embd` floats, so when they are large (a 1B
/// model's 32 heads × 2048 = 256 KiB per workgroup, vs 20 KiB for SmolLM2's 9 × 576) more
/// rows per workgroup cut the repeated L2 traffic: one pass per 4,096 floats of n_head
/// partials, 1 to 16. (With 4 heads per attention workgroup the 1B model's short-context
/// partials are 64 KiB, but 16 passes still measured best there: BF16 2,055 tok/s vs 1,905
/// at 4 passes and 1,914 at 8; Q4_K 1,964 vs 1,946 and 1,972.) On a software adapter 32, the
/// most ([`FusedShape::software`](super::FusedShape::software)).
/// `KernelTuning::ffn_passes` overrides it for measurements.
pub fn ffn_up_passes(s: &FusedShape) -> u32 {
    if let Some(p) = s.tuning.ffn_passes {
        return p;
    }
    if s.software {
        let rows_per_pass = WORKGROUP / ffn_up_lanes(s);
        return s.n_ff.div_ceil(rows_per_pass).clamp(1, 32);
    }
    (s.n_head * s.n_embd / 4096).clamp(1, 16)
}

/// Whether `fused_ffn_up` runs as two dispatches for a step that sees at most `max_len`
/// positions: the attention combine alone (x_mid, written once), then gate/up with every
/// workgroup loading x_mid, instead of every workgroup rebuilding x_mid from the partials.
/// Worth one more dispatch per layer (~2–3 µs) once the partials each workgroup would read
/// pass [`PRECOMBINE_FLOATS`] (n_head / heads per attention workgroup rows of n_embd at one
/// chunk, n_head × chunks rows beyond): Phi-3-mini's 32 heads × 3072 at one chunk, Llama-3.2-1B's
/// from 4 chunks (1k positions). Never with `POST_NORMS` (the norm of the attention output
/// needs all of it in one workgroup). `KernelTuning::precombine` (0: never, 1: always)
/// overrides it for measurements.
pub fn ffn_up_precombine(s: &FusedShape, max_len: u32) -> bool {
    if s.arch.post_norms {
        return false;
    }
    match s.tuning.precombine {
        Some(v) => v == 1,
        None => {
            let rows = if single_chunk(max_len) {
                s.n_head / s.attention_heads_per_group()
            } else {
                s.n_head * max_len.div_ceil(super::limits::ATTENTION_CHUNK)
            };
            u64::from(rows) * u64::from(s.n_embd) >= PRECOMBINE_FLOATS
        }
    }
}
