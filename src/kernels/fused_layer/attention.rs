//! Dispatch 2 of a layer: `fused_attention` (attention over a chunk of positions, the chunk's
//! share of the output projection; with QK_NORM also the KV append), and how much it loads up
//! front.

use super::kv_cache::cache_res;
use super::limits::{
    single_chunk, ATTENTION_CHUNK, ATTENTION_MAX_BLOCK_ROWS, ATTENTION_MIN_GROUPS,
};
use super::o_proj::o_split;
use super::shape::{FusedShape, LayerAttention, LayerVectors};
use super::vectors::{check_vectors, flag_len};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::kernels::attention::KvFormat;
use crate::kernels::binding::BufferView;
use crate::kernels::checks::{check_buffer, require};
use crate::kernels::layer_indexing::LayerIndexing;
use crate::kernels::layer_indexing::{in_group, layer_grid, layer_prelude, weight_res};
use crate::kernels::pipeline::{compose, Bound, PassState, Pipeline, Slot};
use crate::kernels::weights::{GpuWeight, WeightFormat};
use crate::shaders;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionParams {
    scale: f32,
    window: u32,
    eps: f32,
    q_norm_off: u32,
    k_norm_off: u32,
    _pad: [u32; 3],
}
const _: () = assert!(std::mem::size_of::<AttentionParams>() == 32);

/// Dispatch 2: chunked attention + per-chunk output projection → `part` (+ the KV append with
/// QK_NORM; else `fused_ffn_down` appends, so this kernel only reads the cache). Two
/// pipelines, as for [`FusedFfnUp`](super::FusedFfnUp): for steps whose context fits one attention chunk, and for
/// any step (they differ in what they load up front, [`attention_preloads`]; one pipeline
/// serves both where they would not).
/// Layer-indexed ([`LayerIndexing`]; the layer rides in x: `n_head / ATT_HG + layer`
/// columns), bindings in `@group(1)`.
#[derive(Debug, Clone)]
pub struct FusedAttention {
    single: Pipeline,
    /// `None` where both variants load the same ([`attention_preloads`]): one pipeline.
    general: Option<Pipeline>,
    /// [`o_split`] models: the single-chunk variant that leaves the projection to
    /// `fused_o_proj`.
    split: Option<Pipeline>,
    shape: FusedShape,
    ix: LayerIndexing,
}

/// [`FusedAttention`] bound; the grid's chunk count is chosen at record time.
#[derive(Debug, Clone)]
pub struct FusedAttentionCall {
    single: Bound,
    general: Bound,
    split: Option<Bound>,
    /// Workgroups along x: head groups of ATT_HG query heads.
    slots: u32,
    /// ATT_HG.
    heads: u32,
    max_chunks: u32,
    n_embd: u32,
    min_groups: u32,
}

impl FusedAttention {
    pub async fn new(
        ctx: &GpuContext,
        s: &FusedShape,
        kv: KvFormat,
        o: WeightFormat,
        ix: &LayerIndexing,
    ) -> Result<Self> {
        s.check_device(ctx)?;
        // The QK_NORM code normalises and rotates one head per workgroup.
        require(
            !s.arch.qk_norm || s.attention_heads_per_group() == 1,
            "fused_attention: per-head Q/K norms need one query head per workgroup",
        )?;
        let x_base = layer_grid(
            ctx,
            "maxComputeWorkgroupsPerDimension (fused_attention: head groups + layers)",
            s.n_head / s.attention_heads_per_group(),
            ix.n_layer,
        )?;
        let source = |single: bool, split: bool| -> Result<String> {
            let (kp, vp) = attention_preloads(s, single);
            Ok(in_group(
                compose(&[
                    &s.wgsl_prelude(ctx, kv.prelude(ctx)?, 32),
                    &format!(
                        "const KP: u32 = {kp}u;\nconst VP: u32 = {vp}u;\nconst O_SPLIT: bool = {split};"
                    ),
                    shaders::COMMON,
                    &layer_prelude(ix, x_base, &[("wo", o)], true),
                    shaders::FUSED_ATTENTION,
                ]),
                1,
            ))
        };
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
            Slot::ReadWrite,
            Slot::Read,
            Slot::ReadWrite,
            Slot::Read,
        ];
        let single =
            Pipeline::new_in_group(ctx, "fused_attention", &source(true, false)?, &slots, 1)
                .await?;
        let general = if attention_preloads(s, true) == attention_preloads(s, false) {
            None
        } else {
            Some(
                Pipeline::new_in_group(ctx, "fused_attention", &source(false, false)?, &slots, 1)
                    .await?,
            )
        };
        let split = if o_split(s) {
            Some(
                Pipeline::new_in_group(ctx, "fused_attention", &source(true, true)?, &slots, 1)
                    .await?,
            )
        } else {
            None
        };
        Ok(Self {
            single,
            general,
            split,
            shape: *s,
            ix: *ix,
        })
    }

    /// One layer's entry of the uniform array, checked against the vector arena.
    pub fn params(
        &self,
        ctx: &GpuContext,
        vecs: &wgpu::Buffer,
        layer: &LayerVectors,
        attention: &LayerAttention,
    ) -> Result<AttentionParams> {
        let s = &self.shape;
        let qk = flag_len(s.arch.qk_norm, s.head_dim);
        check_vectors(ctx, vecs, &[(layer.q_norm, qk), (layer.k_norm, qk)])?;
        Ok(AttentionParams {
            scale: attention.scale,
            window: attention.window.unwrap_or(0),
            eps: s.eps,
            q_norm_off: layer.q_norm,
            k_norm_off: layer.k_norm,
            _pad: [0; 3],
        })
    }

    /// One layer's call (stacked Wo and KV caches: every layer's). `k_cache`, `v_cache`: the
    /// layer's views. `params`: [`FusedAttention::params`] of every layer.
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        params: &wgpu::Buffer,
        state: &wgpu::Buffer,
        qkv: &wgpu::Buffer,
        k_cache: &BufferView,
        v_cache: &BufferView,
        wo: &GpuWeight,
        part: &wgpu::Buffer,
        vecs: &wgpu::Buffer,
    ) -> Result<FusedAttentionCall> {
        let s = &self.shape;
        require(
            wo.k == s.n_q() && wo.n == s.n_embd,
            "fused_attention: Wo must be [n_head * head_dim, n_embd]",
        )?;
        check_buffer(ctx, "fused_attention part", part, s.partials_len())?;
        let stacked = self.ix.shared(1, true);
        let buffers = [
            state.into(),
            qkv.into(),
            cache_res(k_cache, stacked),
            cache_res(v_cache, stacked),
            weight_res(ctx, wo, stacked)?,
            part.into(),
            vecs.into(),
        ];
        let single = self.single.bind_with_uniform(ctx, params, &buffers)?;
        let split = match &self.split {
            Some(p) => Some(p.bind_with_uniform(ctx, params, &buffers)?),
            None => None,
        };
        Ok(FusedAttentionCall {
            split,
            general: match &self.general {
                Some(g) => g.bind_with_uniform(ctx, params, &buffers)?,
                None => single.clone(),
            },
            single,
            slots: s.n_head / s.attention_heads_per_group(),
            heads: s.attention_heads_per_group(),
            max_chunks: s.max_chunks(),
            n_embd: s.n_embd,
            min_groups: attention_min_groups(s),
        })
    }
}

impl FusedAttentionCall {
    /// Workgroups along x (besides the layer's): n_head / ATT_HG, each loading its chunk of
    /// one KV head's cache.
    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Whether a step that sees at most `max_len` positions leaves the output projection to
    /// `fused_o_proj` ([`o_split`] models, single-chunk steps).
    pub fn splits(&self, max_len: u32) -> bool {
        self.split.is_some() && single_chunk(max_len)
    }

    /// The grid for layer `layer` of a step whose visible length is at most `max_len`.
    fn groups(&self, layer: u32, max_len: u32) -> [u32; 3] {
        if self.splits(max_len) {
            return [self.slots + layer, 1, 1];
        }
        let chunks = max_len.div_ceil(ATTENTION_CHUNK).clamp(1, self.max_chunks);
        // Few head-group-chunks (short contexts): split Wo's rows too, so at least ~64
        // workgroups stream the projection (one workgroup streams only ~10 GB/s), and no
        // workgroup projects more than ATTENTION_MAX_BLOCK_ROWS rows of one head's columns
        // (wide models: each block recomputes its chunk's attention, so more blocks cost that,
        // fewer a longer projection).
        let blocks = self
            .min_groups
            .div_ceil(self.slots * chunks)
            .max((self.n_embd * self.heads).div_ceil(ATTENTION_MAX_BLOCK_ROWS))
            .clamp(1, self.n_embd.div_ceil(32));
        [self.slots + layer, chunks, blocks]
    }

    /// The pipeline variant for a step that sees at most `max_len` positions.
    fn pick(&self, max_len: u32) -> &Bound {
        if let (Some(split), true) = (&self.split, single_chunk(max_len)) {
            split
        } else if single_chunk(max_len) {
            &self.single
        } else {
            &self.general
        }
    }

    /// Records layer `layer`'s attention for a step that sees at most `max_len` positions.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, layer: u32, max_len: u32) {
        self.pick(max_len)
            .dispatch(pass, self.groups(layer, max_len));
    }

    /// [`FusedAttentionCall::record`], setting only what `state` says is not set.
    pub(crate) fn record_layer<'a>(
        &'a self,
        pass: &mut wgpu::ComputePass<'_>,
        state: &mut PassState<'a>,
        layer: u32,
        max_len: u32,
    ) {
        self.pick(max_len)
            .dispatch_tracked(pass, state, self.groups(layer, max_len));
    }
}

/// How much `fused_attention` loads before it needs it: (`KP`, `VP`) = Wo passes whose weights
/// each invocation loads at the start, and value rows it loads before the scores, for the
/// single-chunk variant (`single`: steps within [`ATTENTION_CHUNK`] positions, whose 8 Wo row
/// blocks need 3 passes on SmolLM2) or the general one (fewer blocks, up to 18 passes). More of
/// both take memory round trips off the kernel's critical path (the value phase and the
/// projection then wait on no memory up to `VP` rows per invocation and `KP` passes), at the
/// cost of registers. Measured on an H200 with SmolLM2 (head_dim 64, bench/NOTES.md): VP 16
/// instead of 2 decodes 1–3% faster, and KP 9 instead of 3 another 5% at 1k context, but costs
/// the single-chunk steps ~1.7 µs per attention dispatch (through Dawn too), so they keep KP 3;
/// KP 18 spills. Larger heads keep (3, 2): each of their invocations already holds a longer key
/// row and more units per pass (not measured). A workgroup of ATT_HG heads
/// ([`FusedShape::attention_heads_per_group`]) takes KP / ATT_HG (at least 1): its passes load
/// ATT_HG times the units (at 1B width with 4 heads, KP 1 beat 2 and 4 on an H200).
/// `KernelTuning`'s `attention_kp` (general), `attention_kp_single` and `attention_vp` override
/// them for measurements.
pub fn attention_preloads(s: &FusedShape, single: bool) -> (u32, u32) {
    let (kp, vp) = match (s.head_dim <= 64, single) {
        (true, true) => (3, 16),
        (true, false) => (9, 16),
        (false, _) => (3, 2),
    };
    // A workgroup of ATT_HG heads loads ATT_HG times the units per pass and (by the row-block
    // rule) has about 1 / ATT_HG of the passes: the same registers for kp / ATT_HG passes.
    let kp = (kp / s.attention_heads_per_group()).max(1);
    let tuned_kp = if single {
        s.tuning.attention_kp_single
    } else {
        s.tuning.attention_kp
    };
    (tuned_kp.unwrap_or(kp), s.tuning.attention_vp.unwrap_or(vp))
}

/// Workgroups the attention dispatch aims for at short contexts ([`ATTENTION_MIN_GROUPS`]; Wo's
/// rows are split into blocks to reach it), 1 on a software adapter: every Wo block repeats its
/// head's scores and weighted values, which fills a GPU's idle cores but is only more CPU time
/// there (lavapipe, 2 cores, 2026-11-28: SmolLM2 fused decode 0.70 → 1.40 tok/s; the 32-head
/// K-quant test model 15.5 → 22 tok/s). `KernelTuning::attention_groups` overrides it for
/// measurements (and for the tests that keep the GPU's block split covered on CI).
fn attention_min_groups(s: &FusedShape) -> u32 {
    let default = if s.software { 1 } else { ATTENTION_MIN_GROUPS };
    s.tuning.attention_groups.unwrap_or(default)
}
