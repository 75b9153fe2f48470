//! The four dispatches of one transformer layer in a fused decode step (one token).
//!
//! | dispatch | WGSL | work | workgroups |
//! |---|---|---|---|
//! | 1 | `fused_qkv` | RMS norm, Q/K/V projections, RoPE | (n_q + 2 n_kv) / (256 / lanes) |
//! | 2 | `fused_attention` | KV append, attention over a chunk, the chunk's output projection | n_head × chunks × row blocks |
//! | 3 | `fused_ffn_up` | attention combine + residual, RMS norm, gate/up, SwiGLU | n_ff / (256 / lanes × [`ffn_up_passes`]) |
//! | 4 | `fused_ffn_down` | down projection + residual | n_embd / (256 / lanes) |
//!
//! Each grid's x extent carries the layer on top (`layer` extra columns that return at once:
//! [`LayerIndexing`]), so one bind group per role serves every layer whose weights are stacked,
//! and dispatch `k` of a layer binds at group index `k - 1`.
//!
//! Architectures beyond plain llama blocks ([`FusedArch`]) keep the four dispatches: Q/K/V
//! biases ride in `fused_qkv`; per-head Q/K norms move RoPE into `fused_attention` (which holds
//! whole heads); a post-attention norm is applied where `fused_ffn_up` rebuilds the attention
//! output; a post-FFN norm is deferred to the next consumer (`fused_ffn_down` writes the
//! residual as base and delta, the next layer's kernels normalise delta as they read it, and
//! [`FusedPostNorm`] does it once per step before the head). Their vectors (norm weights,
//! biases) live in one arena buffer ([`LayerVectors`] gives the offsets), so no kernel needs
//! more than WebGPU's default 8 storage bindings.
//!
//! Why this split: a dispatch boundary is needed wherever every output depends on every
//! output of the previous stage — after Q/K/V (attention needs the whole head), after
//! attention, after the residual (the norm needs all of it), after gate/up (down needs all of
//! it) and after down (the next norm). That is five; the output projection is moved into the
//! attention dispatch (each head-chunk projects its own unnormalised output — linear, so the
//! softmax normalisation is applied afterwards, when dispatch 3 sums the partials), which
//! removes one boundary without recomputing anything. Norms are recomputed per output row
//! (their sum of squares rides along in the row's reduction) instead of costing a dispatch.
//!
//! How each kernel keeps its latency low (at batch 1 they are latency-bound: a step's
//! weights are ~100 KiB–1 MiB per dispatch, far below what the memory bus moves in a
//! microsecond): the model's dims are WGSL constants ([`FusedShape::wgsl_prelude`]), so
//! loops over a row unroll and every invocation issues all of its weight loads first; the
//! RMS norm's scale is applied after the dot products (it is a scalar), so `sum(x^2)` comes
//! out of the same row reduction and no workgroup normalises x before using it; each output
//! row is spread over [`lanes_for`] lanes, which reduce with subgroup operations when the
//! adapter's subgroups are exactly 32 wide (`shaders/reduce_subgroup.wgsl`), else through
//! workgroup memory (`reduce_shared.wgsl`). Measurements behind these choices:
//! `bench/NOTES.md`.

use super::attention::KvFormat;
use super::layer_indexing::{in_group, layer_grid, layer_prelude, weight_res};
pub use super::layer_indexing::{uniform_array, LayerIndexing};
use super::weights::{GpuWeight, WeightFormat};
use super::BufferView;
use super::{check_buffer, compose, require, Bound, PassState, Pipeline, Res, Slot};
use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;
use crate::shaders;

/// Invocations per workgroup of the fused kernels (`WG`).
pub const WORKGROUP: u32 = 256;
/// Largest n_embd the fused kernels keep in workgroup memory.
pub const MAX_EMBD: u32 = 2048;
/// Key positions per attention workgroup (`CHUNK` in fused_attention.wgsl).
pub const ATTENTION_CHUNK: u32 = 256;
/// Workgroups the attention dispatch aims for (Wo's rows are split into blocks to reach it).
pub const ATTENTION_MIN_GROUPS: u32 = 64;
/// Largest `n_head × chunks` (chunks = nCtx / 256) whose merge weights fused_ffn_up.wgsl keeps
/// in workgroup memory (4 KiB, within WebGPU's default 16 KiB with its other arrays).
pub const MAX_HEAD_CHUNKS: u32 = 1024;
/// Largest head_dim of fused_attention.wgsl.
pub const MAX_HEAD_DIM: u32 = 256;

/// Offset of an absent vector in [`LayerVectors`] (`NONE` in WGSL).
pub const NO_VECTOR: u32 = u32::MAX;

/// The architecture switches of the fused kernels (WGSL constants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FusedArch {
    /// Q/K/V biases (`QKV_BIAS`: qwen2).
    pub qkv_bias: bool,
    /// Output-projection bias (`O_BIAS`).
    pub o_bias: bool,
    /// Per-head Q/K RMS norms (`QK_NORM`: qwen3, gemma3).
    pub qk_norm: bool,
    /// Norms of the attention and FFN outputs (`POST_NORMS`: gemma3).
    pub post_norms: bool,
    /// GELU-tanh gate instead of SiLU (`GELU`: gemma3).
    pub gelu: bool,
}

/// Where one layer's vectors sit in the vector arena, in floats (multiples of 4), or
/// [`NO_VECTOR`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerVectors {
    pub attn_norm: u32,
    pub ffn_norm: u32,
    /// Q, K and V biases, consecutive.
    pub qkv_bias: u32,
    pub o_bias: u32,
    pub q_norm: u32,
    pub k_norm: u32,
    pub post_attn_norm: u32,
    pub post_ffn_norm: u32,
    /// The previous layer's `post_ffn_norm`: the norm of the delta this layer's input carries.
    pub incoming_norm: u32,
}

/// One layer's attention settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LayerAttention {
    /// Score scale (1 / sqrt(head_dim) unless the model says otherwise).
    pub scale: f32,
    /// Visible positions of a sliding-window layer; `None`: all.
    pub window: Option<u32>,
    /// RoPE frequency base of this layer.
    pub rope_freq_base: f32,
}

/// The model geometry the fused kernels need.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FusedShape {
    pub n_embd: u32,
    pub n_ff: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub head_dim: u32,
    pub n_rot: u32,
    pub neox: bool,
    pub rope_freq_base: f32,
    pub eps: f32,
    /// KV cache capacity in positions.
    pub n_ctx: u32,
    pub arch: FusedArch,
}

impl FusedShape {
    pub fn n_q(&self) -> u32 {
        self.n_head * self.head_dim
    }
    pub fn n_kv(&self) -> u32 {
        self.n_head_kv * self.head_dim
    }
    /// Attention chunk slots per head (enough for the whole cache).
    pub fn max_chunks(&self) -> u32 {
        self.n_ctx.div_ceil(ATTENTION_CHUNK)
    }
    /// Floats per row of the attention partials: n_embd values, then m and l, padded to a
    /// vec4 (`PART_STRIDE`).
    pub fn part_stride(&self) -> u32 {
        self.n_embd + 4
    }
    /// Floats of the attention partials buffer: `[n_head, max_chunks, part_stride]`.
    pub fn partials_len(&self) -> u64 {
        u64::from(self.n_head) * u64::from(self.max_chunks()) * u64::from(self.part_stride())
    }
    /// Floats of the residual stream between fused layers: n_embd, or base and delta
    /// (`POST_NORMS`).
    pub fn residual_len(&self) -> u64 {
        u64::from(self.n_embd) * if self.arch.post_norms { 2 } else { 1 }
    }
    /// RoPE's `theta_scale` for a layer whose base is `freq_base`.
    pub fn theta_scale(&self, freq_base: f32) -> f32 {
        freq_base.powf(-2.0 / self.n_rot as f32)
    }

    /// The WGSL that starts every fused kernel of this shape: `enable` directives (subgroups
    /// when [`GpuContext::subgroups32`]), `extra` (e.g. the KV element type, which may carry
    /// its own `enable`), the shape as constants, and the row reductions. Constants instead of
    /// uniforms let the driver unroll the loops over a row and issue all loads at once; the
    /// pipelines are built per model, so this costs nothing at run time.
    /// `lanes`: invocations per output row of the kernel (`LANES`, see [`lanes_for`]).
    pub fn wgsl_prelude(&self, ctx: &GpuContext, extra: &str, lanes: u32) -> String {
        let sg = ctx.subgroups32();
        format!(
            "{enable}{extra}
const LANES: u32 = {lanes}u;
const N_EMBD: u32 = {n_embd}u;
const N_FF: u32 = {n_ff}u;
const N_HEAD: u32 = {n_head}u;
const N_HEAD_KV: u32 = {n_head_kv}u;
const HEAD_DIM: u32 = {head_dim}u;
const N_ROT: u32 = {n_rot}u;
const NEOX: bool = {neox};
const N_CTX: u32 = {n_ctx}u;
const MAX_CHUNKS: u32 = {max_chunks}u;
const ATT_CHUNK: u32 = {chunk}u;
const PART_STRIDE: u32 = {stride}u;
const QKV_BIAS: bool = {qkv_bias};
const O_BIAS: bool = {o_bias};
const QK_NORM: bool = {qk_norm};
const POST_NORMS: bool = {post_norms};
const GELU: bool = {gelu};
const QKN_LEN: u32 = {qkn_len}u;
const NONE: u32 = 0xffffffffu;
{reduce}",
            enable = if sg { ctx.subgroups_enable() } else { "" },
            n_embd = self.n_embd,
            n_ff = self.n_ff,
            n_head = self.n_head,
            n_head_kv = self.n_head_kv,
            head_dim = self.head_dim,
            n_rot = self.n_rot,
            neox = self.neox,
            n_ctx = self.n_ctx,
            max_chunks = self.max_chunks(),
            chunk = ATTENTION_CHUNK,
            stride = self.part_stride(),
            qkv_bias = self.arch.qkv_bias,
            o_bias = self.arch.o_bias,
            qk_norm = self.arch.qk_norm,
            post_norms = self.arch.post_norms,
            gelu = self.arch.gelu,
            qkn_len = if self.arch.qk_norm { self.head_dim } else { 1 },
            reduce = if sg {
                shaders::REDUCE_SUBGROUP
            } else {
                shaders::REDUCE_SHARED
            },
        )
    }

    /// Whether the fused kernels handle this geometry; the error names the limit.
    pub fn check(&self) -> Result<()> {
        let limit = |limit: &'static str, needed: u32, available: u32| {
            if needed > available {
                Err(FuselmError::LimitExceeded {
                    limit,
                    needed: u64::from(needed),
                    available: u64::from(available),
                })
            } else {
                Ok(())
            }
        };
        limit("fused strategy: n_embd", self.n_embd, MAX_EMBD)?;
        limit("fused strategy: head_dim", self.head_dim, MAX_HEAD_DIM)?;
        limit(
            "fused strategy: n_head x attention chunks (nCtx / 256)",
            self.n_head * self.max_chunks(),
            MAX_HEAD_CHUNKS,
        )?;
        require(
            self.head_dim % 8 == 0 && self.n_rot % 2 == 0 && self.n_rot <= self.head_dim,
            "fused strategy: head_dim must be a multiple of 8 and n_rot even and <= head_dim",
        )?;
        require(
            self.n_embd % 8 == 0 && self.n_ff % 8 == 0 && self.n_ctx > 0,
            "fused strategy: n_embd and n_ff must be multiples of 8",
        )?;
        require(
            self.n_head_kv > 0 && self.n_head % self.n_head_kv == 0,
            "fused strategy: n_head must be a multiple of n_head_kv",
        )
    }
}

/// Lanes (invocations) per output row of a fused matrix-vector kernel whose rows have `units`
/// 8-value units: the fewest powers of two from 32 up to `max` that leave each lane at most
/// two units. At batch 1 these kernels are bound by each warp's chain of dependent
/// instructions, not by memory (a workgroup per SM leaves nothing to hide latency with), so
/// spreading a row over more lanes shortens every warp's work; a row wider than one subgroup
/// costs one extra barrier to combine. Natively, `FUSELM_LANES` (32..256) overrides it, to
/// measure the alternatives on one device.
pub fn lanes_for(units: u32, max: u32) -> u32 {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(l) = std::env::var("FUSELM_LANES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|l| l.is_power_of_two() && (32..=256).contains(l))
    {
        return l.min(max);
    }
    let mut lanes = 32;
    while lanes < max && units > 2 * lanes {
        lanes *= 2;
    }
    lanes
}

/// Whether a step that sees at most `max_len` positions records the single-chunk variants of
/// `fused_attention` and `fused_ffn_up` (one rule for both, so they switch together).
fn single_chunk(max_len: u32) -> bool {
    max_len <= ATTENTION_CHUNK
}

/// A bound fused dispatch with a fixed grid.
#[derive(Debug, Clone)]
pub struct FusedCall {
    bound: Bound,
    groups: [u32; 3],
}

impl FusedCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.dispatch(pass, self.groups);
    }

    /// Records layer `layer` of a layer kernel.
    pub fn record_at(&self, pass: &mut wgpu::ComputePass<'_>, layer: u32) {
        let [x, y, z] = self.groups;
        self.bound.dispatch(pass, [x + layer, y, z]);
    }

    /// [`FusedCall::record_at`], setting only what `state` says is not set.
    pub(crate) fn record_layer<'a>(
        &'a self,
        pass: &mut wgpu::ComputePass<'_>,
        state: &mut PassState<'a>,
        layer: u32,
    ) {
        let [x, y, z] = self.groups;
        self.bound.dispatch_tracked(pass, state, [x + layer, y, z]);
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct QkvParams {
    theta_scale: f32,
    eps: f32,
    norm_off: u32,
    bias_off: u32,
    pf_off: u32,
    _pad: [u32; 3],
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
        let lanes = lanes_for(s.n_embd / 8, WORKGROUP / 2);
        let rows = s.n_q() + 2 * s.n_kv();
        let x_base = layer_grid(
            ctx,
            "maxComputeWorkgroupsPerDimension (fused_qkv: row groups + layers)",
            rows.div_ceil(WORKGROUP / lanes),
            ix.n_layer,
        )?;
        let source = compose(&[
            &s.wgsl_prelude(ctx, "", lanes),
            shaders::COMMON,
            shaders::ROPE_MATH,
            &layer_prelude(ix, x_base, &[("wq", q), ("wk", k), ("wv", v)], true),
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
        rope_freq_base: f32,
    ) -> Result<QkvParams> {
        let s = &self.shape;
        let pf_off = if s.arch.post_norms {
            layer.incoming_norm
        } else {
            NO_VECTOR
        };
        let params = QkvParams {
            theta_scale: s.theta_scale(rope_freq_base),
            eps: s.eps,
            norm_off: layer.attn_norm,
            bias_off: layer.qkv_bias,
            pf_off,
            _pad: [0; 3],
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
        check_buffer(ctx, "fused_qkv qkv", qkv, u64::from(s.n_q() + 2 * s.n_kv()))?;
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

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionParams {
    scale: f32,
    window: u32,
    theta_scale: f32,
    eps: f32,
    q_norm_off: u32,
    k_norm_off: u32,
    _pad: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<AttentionParams>() == 32);

/// Dispatch 2: KV append + chunked attention + per-chunk output projection → `part`. Two
/// pipelines, as for [`FusedFfnUp`]: for steps whose context fits one attention chunk, and for
/// any step (they differ in what they load up front, [`attention_preloads`]; one pipeline
/// serves both where they would not).
/// Layer-indexed ([`LayerIndexing`]; the layer rides in x: `n_head + layer` columns), bindings
/// in `@group(1)`.
#[derive(Debug, Clone)]
pub struct FusedAttention {
    single: Pipeline,
    /// `None` where both variants load the same ([`attention_preloads`]): one pipeline.
    general: Option<Pipeline>,
    shape: FusedShape,
    ix: LayerIndexing,
}

/// [`FusedAttention`] bound; the grid's chunk count is chosen at record time.
#[derive(Debug, Clone)]
pub struct FusedAttentionCall {
    single: Bound,
    general: Bound,
    n_head: u32,
    max_chunks: u32,
    n_embd: u32,
}

impl FusedAttention {
    pub async fn new(
        ctx: &GpuContext,
        s: &FusedShape,
        kv: KvFormat,
        o: WeightFormat,
        ix: &LayerIndexing,
    ) -> Result<Self> {
        s.check()?;
        let x_base = layer_grid(
            ctx,
            "maxComputeWorkgroupsPerDimension (fused_attention: heads + layers)",
            s.n_head,
            ix.n_layer,
        )?;
        let source = |single: bool| -> Result<String> {
            let (kp, vp) = attention_preloads(s, single);
            Ok(in_group(
                compose(&[
                    &s.wgsl_prelude(ctx, kv.prelude(ctx)?, 32),
                    &format!("const KP: u32 = {kp}u;\nconst VP: u32 = {vp}u;"),
                    shaders::COMMON,
                    shaders::ROPE_MATH,
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
            Pipeline::new_in_group(ctx, "fused_attention", &source(true)?, &slots, 1).await?;
        let general = if attention_preloads(s, true) == attention_preloads(s, false) {
            None
        } else {
            Some(Pipeline::new_in_group(ctx, "fused_attention", &source(false)?, &slots, 1).await?)
        };
        Ok(Self {
            single,
            general,
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
            theta_scale: s.theta_scale(attention.rope_freq_base),
            eps: s.eps,
            q_norm_off: layer.q_norm,
            k_norm_off: layer.k_norm,
            _pad: [0; 2],
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
        fn cache(v: &BufferView, stacked: bool) -> Res<'_> {
            if stacked {
                (&v.buffer).into()
            } else {
                v.into()
            }
        }
        let buffers = [
            state.into(),
            qkv.into(),
            cache(k_cache, stacked),
            cache(v_cache, stacked),
            weight_res(ctx, wo, stacked)?,
            part.into(),
            vecs.into(),
        ];
        let single = self.single.bind_with_uniform(ctx, params, &buffers)?;
        Ok(FusedAttentionCall {
            general: match &self.general {
                Some(g) => g.bind_with_uniform(ctx, params, &buffers)?,
                None => single.clone(),
            },
            single,
            n_head: s.n_head,
            max_chunks: s.max_chunks(),
            n_embd: s.n_embd,
        })
    }
}

impl FusedAttentionCall {
    /// The grid for layer `layer` of a step whose visible length is at most `max_len`.
    fn groups(&self, layer: u32, max_len: u32) -> [u32; 3] {
        let chunks = max_len.div_ceil(ATTENTION_CHUNK).clamp(1, self.max_chunks);
        // Few head-chunks (short contexts): split Wo's rows too, so at least ~64 workgroups
        // stream the projection (one workgroup streams only ~10 GB/s).
        let blocks = ATTENTION_MIN_GROUPS
            .div_ceil(self.n_head * chunks)
            .clamp(1, self.n_embd.div_ceil(32));
        [self.n_head + layer, chunks, blocks]
    }

    /// The pipeline variant for a step that sees at most `max_len` positions.
    fn pick(&self, max_len: u32) -> &Bound {
        if single_chunk(max_len) {
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
/// pipelines: for steps whose context fits one attention chunk, and for any step.
/// Layer-indexed ([`LayerIndexing`]), bindings in `@group(2)`.
#[derive(Debug, Clone)]
pub struct FusedFfnUp {
    single: Pipeline,
    general: Pipeline,
    shape: FusedShape,
    ix: LayerIndexing,
    x_base: u32,
}

/// [`FusedFfnUp`] bound; the variant is chosen at record time from the steps' context.
#[derive(Debug, Clone)]
pub struct FusedFfnUpCall {
    single: Bound,
    general: Bound,
    groups: [u32; 3],
}

impl FusedFfnUpCall {
    fn pick(&self, layer: u32, max_len: u32) -> (&Bound, [u32; 3]) {
        let bound = if single_chunk(max_len) {
            &self.single
        } else {
            &self.general
        };
        let [x, y, z] = self.groups;
        (bound, [x + layer, y, z])
    }

    /// Records layer `layer`'s combine + FFN-up for a step that sees at most `max_len`
    /// positions.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, layer: u32, max_len: u32) {
        let (bound, groups) = self.pick(layer, max_len);
        bound.dispatch(pass, groups);
    }

    /// [`FusedFfnUpCall::record`], setting only what `state` says is not set.
    pub(crate) fn record_layer<'a>(
        &'a self,
        pass: &mut wgpu::ComputePass<'_>,
        state: &mut PassState<'a>,
        layer: u32,
        max_len: u32,
    ) {
        let (bound, groups) = self.pick(layer, max_len);
        bound.dispatch_tracked(pass, state, groups);
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
        s.check()?;
        let lanes = lanes_for(s.n_embd / 8, WORKGROUP);
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
        let source = |single: bool| {
            in_group(
                compose(&[
                    &s.wgsl_prelude(ctx, "", lanes),
                    &format!(
                        "const SINGLE_CHUNK: bool = {single};\nconst RPASS: u32 = {passes}u;\n"
                    ),
                    shaders::COMMON,
                    &layer_prelude(ix, x_base, &[("wgate", gate), ("wup", up)], true),
                    shaders::FUSED_FFN_UP,
                ]),
                2,
            )
        };
        let single = Pipeline::new_in_group(ctx, "fused_ffn_up", &source(true), &slots, 2).await?;
        let general =
            Pipeline::new_in_group(ctx, "fused_ffn_up", &source(false), &slots, 2).await?;
        Ok(Self {
            single,
            general,
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
        Ok(FusedFfnUpCall {
            single: self.single.bind_with_uniform(ctx, params, &buffers)?,
            general: self.general.bind_with_uniform(ctx, params, &buffers)?,
            groups: [self.x_base, 1, 1],
        })
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
/// row and more units per pass (not measured). Natively, `FUSELM_ATT_KP` (general),
/// `FUSELM_ATT_KP_SINGLE` (1..18) and `FUSELM_ATT_VP` (1..16) override them for measurements.
pub fn attention_preloads(s: &FusedShape, single: bool) -> (u32, u32) {
    let (kp, vp) = match (s.head_dim <= 64, single) {
        (true, true) => (3, 16),
        (true, false) => (9, 16),
        (false, _) => (3, 2),
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        let knob = |name: &str, max: u32, default: u32| {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse::<u32>().ok())
                .filter(|v| (1..=max).contains(v))
                .unwrap_or(default)
        };
        let kp_name = if single {
            "FUSELM_ATT_KP_SINGLE"
        } else {
            "FUSELM_ATT_KP"
        };
        (knob(kp_name, 18, kp), knob("FUSELM_ATT_VP", 16, vp))
    }
    #[cfg(target_arch = "wasm32")]
    (kp, vp)
}

/// Row passes per workgroup of `fused_ffn_up` (`RPASS`): every workgroup first rebuilds the
/// residual from `n_head` attention partials of `n_embd` floats, so when that is large (a 1B
/// model's 32 × 2048 = 256 KiB per workgroup, vs 20 KiB for SmolLM2's 9 × 576) more rows per
/// workgroup cut the repeated L2 traffic: one pass per 8,192 floats of partials, 1 to 8.
/// Natively, `FUSELM_FFN_PASSES` (1..16) overrides it for measurements.
pub fn ffn_up_passes(s: &FusedShape) -> u32 {
    #[cfg(not(target_arch = "wasm32"))]
    if let Some(p) = std::env::var("FUSELM_FFN_PASSES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .filter(|p| (1..=16).contains(p))
    {
        return p;
    }
    (s.n_head * s.n_embd / 8192).clamp(1, 8)
}

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

/// Length a vector must have when its switch is on, or 0 (not read) when it is off.
fn flag_len(on: bool, len: u32) -> u32 {
    if on {
        len
    } else {
        0
    }
}

/// Every (offset, length) a kernel will read from the vector arena must lie within it and be
/// vec4-aligned; length 0: not read (its offset is ignored).
fn check_vectors(ctx: &GpuContext, vecs: &wgpu::Buffer, wanted: &[(u32, u32)]) -> Result<()> {
    for &(off, len) in wanted {
        if len == 0 {
            continue;
        }
        require(
            off != NO_VECTOR && off % 4 == 0,
            "fused kernels: a vector the architecture needs is missing from the arena",
        )?;
        check_buffer(
            ctx,
            "fused vector arena",
            vecs,
            u64::from(off) + u64::from(len),
        )?;
    }
    Ok(())
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PostNormParams {
    eps: f32,
    pf_off: u32,
    _pad: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<PostNormParams>() == 16);

/// `POST_NORMS` models, once per step before the head: the last layer's deferred post-FFN
/// norm, `x_out = base + rms_norm(delta) * w`.
#[derive(Debug, Clone)]
pub struct FusedPostNorm {
    pipeline: Pipeline,
    shape: FusedShape,
}

impl FusedPostNorm {
    pub async fn new(ctx: &GpuContext, s: &FusedShape) -> Result<Self> {
        s.check()?;
        let source = compose(&[
            &s.wgsl_prelude(ctx, "", WORKGROUP),
            shaders::COMMON,
            shaders::FUSED_POST_NORM,
        ]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "fused_post_norm", &source, &slots).await?;
        Ok(Self {
            pipeline,
            shape: *s,
        })
    }

    /// `x`: the residual (base, delta) of the last layer; `norm_off`: its post-FFN norm.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        state: &wgpu::Buffer,
        x: &wgpu::Buffer,
        vecs: &wgpu::Buffer,
        norm_off: u32,
        x_out: &wgpu::Buffer,
    ) -> Result<FusedCall> {
        let s = &self.shape;
        check_buffer(ctx, "fused_post_norm x", x, s.residual_len())?;
        check_buffer(ctx, "fused_post_norm x_out", x_out, u64::from(s.n_embd))?;
        check_vectors(ctx, vecs, &[(norm_off, s.n_embd)])?;
        let params = PostNormParams {
            eps: s.eps,
            pf_off: norm_off,
            _pad: [0; 2],
        };
        Ok(FusedCall {
            bound: self.pipeline.bind(ctx, &params, &[state, x, vecs, x_out])?,
            groups: [1, 1, 1],
        })
    }
}
