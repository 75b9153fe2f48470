//! The fused decode step: 4 dispatches per layer plus the head and the GPU sampler, every
//! per-token value (position, token id, penalty window, stop flag) on the GPU, so any number
//! of steps can be recorded back to back into one compute pass.
//!
//! Per step: embed (reads `tokens[pos]`), then per layer `fused_qkv`, `fused_attention`,
//! `fused_ffn_up`, `fused_ffn_down` (see `kernels::fused_layer` for the split), then
//! `head_logits`, `sample_select` (only when sampling) and `sample_choose`, which writes the
//! next token to `tokens`, advances `state` and raises `state.done` on a stop id — after which
//! every remaining recorded kernel returns at once. Models with post-FFN norms (gemma3) add
//! `fused_post_norm` before the head (see `kernels::fused_layer`).

use super::activations::{storage, Activations, SamplerBuffers};
use super::gpu_weights::ModelWeights;
use super::profile::RoleCall;
use crate::error::Result;
use crate::gguf::{FfnActivation, ModelConfig, RopeStyle};
use crate::gpu::GpuContext;
use crate::kernels::constraint::{ConstraintMask, ConstraintMaskCall, ConstraintTable};
use crate::kernels::fused_layer::{o_split, uniform_array, FusedOProj};
use crate::kernels::logprobs::{LogprobCalls, LogprobKernels};
use crate::kernels::pipeline::PassState;
use crate::kernels::sample::head_groups;
use crate::kernels::{
    Embed, EmbedCall, FusedArch, FusedAttention, FusedAttentionCall, FusedCall, FusedFfnDown,
    FusedFfnUp, FusedFfnUpCall, FusedPostNorm, FusedQkv, FusedShape, HeadLogits, HeadLogitsCall,
    KvFormat, LayerAttention, LayerIndexing, LayerVectors, SampleCall, SampleChoose, SampleSelect,
    WeightFormat, NO_VECTOR,
};
use std::collections::HashMap;

/// The geometry of `config` for the fused kernels on `ctx`'s adapter, with its tuning.
pub fn fused_shape(c: &ModelConfig, n_ctx: u32, ctx: &GpuContext) -> FusedShape {
    FusedShape {
        n_embd: c.n_embd,
        n_ff: c.n_ff,
        n_head: c.n_head,
        n_head_kv: c.n_head_kv,
        head_dim: c.head_dim,
        n_rot: c.rope_dims,
        neox: c.rope_style == RopeStyle::NeoX,
        rope_freq_base: c.rope_freq_base,
        eps: c.rms_eps,
        n_ctx,
        arch: FusedArch {
            qkv_bias: c.qkv_bias,
            o_bias: c.attn_output_bias,
            qk_norm: c.qk_norm,
            post_norms: c.post_norms,
            gelu: c.ffn_activation == FfnActivation::GeluTanh,
        },
        tuning: *ctx.tuning(),
        software: ctx.identity.is_software,
    }
}

/// Every per-layer vector of the model (norm weights, biases) copied into one buffer, so a
/// fused kernel binds one arena instead of up to six vectors: `fused_ffn_up` of a gemma3 layer
/// reads four, which would take it past WebGPU's 8 storage bindings per stage. Costs a second
/// copy of the vectors (SmolLM2: 2 × 30 × 576 floats = 138 KiB; Gemma 3 270M: 6 × 18 × 640
/// floats = 276 KiB).
pub struct VectorArena {
    pub buffer: wgpu::Buffer,
    pub layers: Vec<LayerVectors>,
}

impl VectorArena {
    /// `rope_factors`: the RoPE frequency factors the model's KV cache size uses, if any
    /// (placed once, every layer pointing at it).
    pub fn build<'w>(
        ctx: &GpuContext,
        weights: &'w ModelWeights,
        rope_factors: Option<&'w wgpu::Buffer>,
    ) -> Self {
        let mut copies: Vec<(&'w wgpu::Buffer, u64)> = Vec::new();
        let mut end = 0u64; // floats
        let mut place = |b: Option<&'w wgpu::Buffer>| -> u32 {
            let Some(b) = b else { return NO_VECTOR };
            let off = end;
            copies.push((b, off));
            end += (b.size() / 4).div_ceil(4) * 4;
            off as u32
        };
        let rope = place(rope_factors);
        let mut layers: Vec<LayerVectors> = Vec::with_capacity(weights.layers.len());
        for w in &weights.layers {
            let e = &w.extra;
            let attn_norm = place(Some(&w.attn_norm));
            let ffn_norm = place(Some(&w.ffn_norm));
            // Q, K, V biases back to back (their lengths are multiples of 4: no padding).
            let qkv_bias = place(e.bq.as_ref());
            place(e.bk.as_ref());
            place(e.bv.as_ref());
            layers.push(LayerVectors {
                attn_norm,
                ffn_norm,
                qkv_bias,
                o_bias: place(e.bo.as_ref()),
                q_norm: place(e.q_norm.as_ref()),
                k_norm: place(e.k_norm.as_ref()),
                post_attn_norm: place(e.post_attn_norm.as_ref()),
                post_ffn_norm: place(e.post_ffn_norm.as_ref()),
                incoming_norm: layers.last().map_or(NO_VECTOR, |l| l.post_ffn_norm),
                rope_factors: rope,
            });
        }
        let buffer = storage(ctx, "fused vector arena", end * 4);
        let mut encoder = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("fused vector arena"),
            });
        for (b, off) in copies {
            encoder.copy_buffer_to_buffer(b, 0, &buffer, off * 4, b.size());
        }
        ctx.queue.submit([encoder.finish()]);
        Self { buffer, layers }
    }
}

/// The end of a step (either strategy's fused path and the fused prefill): head, sampler;
/// with a constraint, its mask before the head ([`Choice::constrained`]).
pub struct Choice {
    head: HeadLogitsCall,
    select: SampleCall,
    choose: SampleCall,
    head_dispatches: u32,
    /// With a constraint: the mask before the head.
    mask: Option<ConstraintMaskCall>,
    /// What a constrained choice is bound from.
    inputs: ChooseInputs,
    /// The step's ranked logits (the log-probability kernels read them).
    logits: wgpu::Buffer,
    /// The mask kernel, compiled on the first constrained generation (not at every load).
    mask_kernel: std::cell::OnceCell<ConstraintMask>,
    /// With log-probabilities: their kernels after the choice.
    logprobs: Option<LogprobCalls>,
    /// The log-probability kernels, compiled on the first generation that asks for them.
    logprob_kernels: std::cell::OnceCell<LogprobKernels>,
}

/// The choose kernel and the buffers it and the mask kernel read, kept to bind a constrained
/// choice.
#[derive(Clone)]
struct ChooseInputs {
    choose: SampleChoose,
    n_best: u32,
    n_vocab: u32,
    state: wgpu::Buffer,
    params: wgpu::Buffer,
    best: wgpu::Buffer,
    cand: wgpu::Buffer,
    tokens: wgpu::Buffer,
    counts: wgpu::Buffer,
}

impl ChooseInputs {
    fn bind(&self, ctx: &GpuContext, constraint: &wgpu::Buffer) -> Result<SampleCall> {
        self.choose.bind(
            ctx,
            self.n_best,
            self.n_vocab,
            &self.state,
            &self.params,
            &self.best,
            &self.cand,
            &self.tokens,
            &self.counts,
            constraint,
        )
    }
}

impl Choice {
    pub async fn bind(
        ctx: &GpuContext,
        config: &ModelConfig,
        weights: &ModelWeights,
        acts: &Activations,
        s: &SamplerBuffers,
    ) -> Result<Self> {
        let head_w = weights.head();
        let head = HeadLogits::new(ctx, head_w.format, config.n_embd)
            .await?
            .bind(
                ctx,
                config.rms_eps,
                &acts.state,
                &acts.x,
                &weights.output_norm,
                head_w,
                &s.counts,
                &s.params,
                &acts.logits,
                &s.best,
            )?;
        let select = SampleSelect::new(ctx).await?.bind(
            ctx,
            config.vocab_size,
            &acts.state,
            &s.params,
            &acts.logits,
            &s.cand,
        )?;
        let inputs = ChooseInputs {
            choose: SampleChoose::new(ctx).await?,
            n_best: head_groups(head_w),
            n_vocab: config.vocab_size,
            state: acts.state.clone(),
            params: s.params.clone(),
            best: s.best.clone(),
            cand: s.cand.clone(),
            tokens: acts.tokens.clone(),
            counts: s.counts.clone(),
        };
        // Unconstrained, the choose kernel's constraint binding is a placeholder it never reads.
        let choose = inputs.bind(ctx, &storage(ctx, "no constraint", 16))?;
        Ok(Self {
            head,
            select,
            choose,
            head_dispatches: head_w.chunks().len() as u32,
            logits: acts.logits.clone(),
            mask: None,
            inputs,
            mask_kernel: std::cell::OnceCell::new(),
            logprobs: None,
            logprob_kernels: std::cell::OnceCell::new(),
        })
    }

    /// This choice followed by the log-probability kernels reporting `top_n` alternatives,
    /// bound for one generation ([`Choice::release_logprobs`] frees them); `kernels` from
    /// [`Choice::logprob_kernels`].
    pub fn with_logprobs(
        &self,
        ctx: &GpuContext,
        kernels: &LogprobKernels,
        top_n: u32,
    ) -> Result<Self> {
        let i = &self.inputs;
        let calls = kernels.bind(ctx, i.n_vocab, top_n, &i.state, &self.logits, &i.tokens)?;
        Ok(Self {
            head: self.head.clone(),
            select: self.select.clone(),
            choose: self.choose.clone(),
            head_dispatches: self.head_dispatches,
            mask: self.mask.clone(),
            inputs: i.clone(),
            mask_kernel: std::cell::OnceCell::new(),
            logits: self.logits.clone(),
            logprobs: Some(calls),
            logprob_kernels: std::cell::OnceCell::new(),
        })
    }

    /// The log-probability kernels (compiled on first use).
    pub async fn logprob_kernels(&self, ctx: &GpuContext) -> Result<&LogprobKernels> {
        if let Some(k) = self.logprob_kernels.get() {
            return Ok(k);
        }
        let k = LogprobKernels::new(ctx).await?;
        Ok(self.logprob_kernels.get_or_init(|| k))
    }

    /// The rows the log-probability kernels write (None without them).
    pub fn logprob_rows(&self) -> Option<&wgpu::Buffer> {
        self.logprobs.as_ref().map(|l| &l.rows)
    }

    /// Destroys what [`Choice::with_logprobs`] made.
    pub fn release_logprobs(&self, ctx: &GpuContext) {
        if let Some(l) = &self.logprobs {
            l.release(ctx);
        }
    }

    /// This choice with `table`'s constraint: its mask before the head, its state advanced
    /// by each chosen token (the sampler's `constrained` must be set).
    pub async fn constrained(&self, ctx: &GpuContext, table: &ConstraintTable) -> Result<Self> {
        let kernel = match self.mask_kernel.get() {
            Some(k) => k,
            None => {
                let k = ConstraintMask::new(ctx).await?;
                self.mask_kernel.get_or_init(|| k)
            }
        };
        let i = &self.inputs;
        Ok(Self {
            head: self.head.clone(),
            select: self.select.clone(),
            choose: i.bind(ctx, &table.buffer)?,
            head_dispatches: self.head_dispatches,
            mask: Some(kernel.bind(ctx, &i.state, table, &i.counts)?),
            inputs: i.clone(),
            mask_kernel: std::cell::OnceCell::new(),
            logits: self.logits.clone(),
            logprobs: None,
            logprob_kernels: std::cell::OnceCell::new(),
        })
    }

    /// Destroys what [`Choice::constrained`] made for one generation (its choice and mask
    /// calls; the head and selection are shared with `self`'s origin and stay).
    pub fn release_constrained(&self, ctx: &GpuContext) {
        if let Some(mask) = &self.mask {
            mask.release(ctx);
            self.choose.release(ctx);
        }
    }

    /// (role, record) of the head, the selection and the choice, for profiling.
    pub fn roles(&self, head_bytes: u64) -> Vec<RoleCall<'_>> {
        let mut roles = Vec::new();
        if let Some(mask) = &self.mask {
            roles.push(RoleCall {
                role: "constraint-mask",
                bytes: 0,
                record: Box::new(move |p| mask.record(p)),
            });
        }
        roles.extend([
            RoleCall {
                role: "norm+head+penalties",
                bytes: head_bytes,
                record: Box::new(move |p| self.head.record(p)),
            },
            RoleCall {
                role: "sample-select",
                bytes: 0,
                record: Box::new(move |p| self.select.record(p)),
            },
            RoleCall {
                role: "sample-choose",
                bytes: 0,
                record: Box::new(move |p| self.choose.record(p)),
            },
        ]);
        if let Some(l) = &self.logprobs {
            roles.push(RoleCall {
                role: "logprobs",
                bytes: 0,
                record: Box::new(move |p| l.record(p)),
            });
        }
        roles
    }

    /// The constraint's mask, head, candidate selection (when sampling), choice + bookkeeping.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, sampling: bool) {
        if let Some(mask) = &self.mask {
            mask.record(pass);
        }
        self.head.record(pass);
        if sampling {
            self.select.record(pass);
        }
        self.choose.record(pass);
        if let Some(l) = &self.logprobs {
            l.record(pass);
        }
    }

    pub fn dispatches(&self, sampling: bool) -> u32 {
        self.head_dispatches
            + u32::from(sampling)
            + 1
            + u32::from(self.mask.is_some())
            + 2 * u32::from(self.logprobs.is_some())
    }
}

struct FusedLayer {
    /// Weight bytes of (qkv, o, gate + up, down).
    bytes: [u64; 4],
    qkv: FusedCall,
    attention: FusedAttentionCall,
    /// The output projection's own dispatch, for the steps where attention leaves it
    /// (`FusedAttentionCall::splits`).
    o_proj: Option<FusedCall>,
    ffn_up: FusedFfnUpCall,
    ffn_down: FusedCall,
}

/// Extra activations of the fused layers.
pub struct FusedBuffers {
    qkv: wgpu::Buffer,
    part: wgpu::Buffer,
    x_mid: wgpu::Buffer,
    /// The residual between layers as (base, delta) when post-FFN norms are deferred
    /// (`POST_NORMS`); otherwise the layers use `Activations::x`.
    resid: Option<wgpu::Buffer>,
    vectors: VectorArena,
}

/// A bound fused decode step (one token).
pub struct FusedDecode {
    embed: EmbedCall,
    embed_dispatches: u32,
    layers: Vec<FusedLayer>,
    /// The last layer's deferred post-FFN norm (`POST_NORMS`), before the head.
    post_norm: Option<FusedCall>,
    /// Where the step's K and V go into the cache: fused_ffn_down, or (QK_NORM) attention.
    append_in_down: bool,
    _buffers: FusedBuffers,
}

impl FusedDecode {
    /// Compiles and binds the fused layers; fails with a typed error when the model's shape
    /// or a weight's size is beyond what the fused kernels handle.
    pub async fn bind(
        ctx: &GpuContext,
        config: &ModelConfig,
        weights: &ModelWeights,
        acts: &Activations,
        kv: KvFormat,
    ) -> Result<Self> {
        let s = fused_shape(config, acts.n_ctx, ctx);
        s.check_device(ctx)?;
        let buffers = FusedBuffers {
            qkv: storage(ctx, "fused qkv", u64::from(s.qkv_len()) * 4),
            part: storage(ctx, "fused attention partials", s.partials_len() * 4),
            x_mid: storage(ctx, "fused x_mid", u64::from(s.n_embd) * 4),
            resid: s
                .arch
                .post_norms
                .then(|| storage(ctx, "fused residual", s.residual_len() * 4)),
            vectors: VectorArena::build(ctx, weights, weights.rope_factors_for(config, acts.n_ctx)),
        };
        // The layers' residual stream: embed writes it, every fused_ffn_down rewrites it.
        let x = buffers.resid.as_ref().unwrap_or(&acts.x);
        let vecs = &buffers.vectors.buffer;
        // One bind group per kernel role for every layer where the role's weights (and for
        // attention the KV caches) are stacked; else one per layer.
        let n_layer = weights.layers.len() as u32;
        let st = weights.stacks.stride_rows;
        let kv4 = acts.kv_stride.map_or(0, |b| (b / (4 * kv.bytes())) as u32);
        let indexing = |strides: &[u32], kv_stride: Option<u32>| {
            let mut i = LayerIndexing {
                n_layer,
                weight_strides: [0; 3],
                kv_stride: kv_stride.unwrap_or(0),
            };
            i.weight_strides[..strides.len()].copy_from_slice(strides);
            if !i.shared(strides.len(), kv_stride.is_some()) {
                i.weight_strides = [0; 3];
                i.kv_stride = 0;
            }
            i
        };
        let ix_qkv = indexing(&st[0..3], None);
        let ix_att = indexing(&st[3..4], Some(kv4));
        let ix_up = indexing(&st[4..6], None);
        let ix_down = indexing(&st[6..7], Some(kv4));
        let mut qkv_k: HashMap<[WeightFormat; 3], FusedQkv> = HashMap::new();
        let mut att_k: HashMap<WeightFormat, FusedAttention> = HashMap::new();
        let mut up_k: HashMap<[WeightFormat; 2], FusedFfnUp> = HashMap::new();
        let mut down_k: HashMap<WeightFormat, FusedFfnDown> = HashMap::new();
        let mut o_k: HashMap<WeightFormat, FusedOProj> = HashMap::new();
        for w in &weights.layers {
            let fq = [w.wq.format, w.wk.format, w.wv.format];
            if let std::collections::hash_map::Entry::Vacant(e) = qkv_k.entry(fq) {
                e.insert(FusedQkv::new(ctx, &s, fq[0], fq[1], fq[2], &ix_qkv).await?);
            }
            if let std::collections::hash_map::Entry::Vacant(e) = att_k.entry(w.wo.format) {
                e.insert(FusedAttention::new(ctx, &s, kv, w.wo.format, &ix_att).await?);
            }
            let fu = [w.w_gate.format, w.w_up.format];
            if let std::collections::hash_map::Entry::Vacant(e) = up_k.entry(fu) {
                e.insert(FusedFfnUp::new(ctx, &s, fu[0], fu[1], &ix_up).await?);
            }
            if let std::collections::hash_map::Entry::Vacant(e) = down_k.entry(w.w_down.format) {
                e.insert(FusedFfnDown::new(ctx, &s, w.w_down.format, kv, &ix_down).await?);
            }
            if o_split(&s) {
                if let std::collections::hash_map::Entry::Vacant(e) = o_k.entry(w.wo.format) {
                    e.insert(FusedOProj::new(ctx, &s, w.wo.format, &ix_att).await?);
                }
            }
        }
        // The per-layer uniform arrays (any pipeline variant of a role reads the same one).
        let (mut qkv_p, mut att_p, mut up_p) = (Vec::new(), Vec::new(), Vec::new());
        for (l, w) in weights.layers.iter().enumerate() {
            let lv = &buffers.vectors.layers[l];
            let (window, rope_freq_base) = config.layer_attention(l as u32);
            let attention = LayerAttention {
                scale: config.attention_scale,
                window,
                rope_freq_base,
                rope_freq_scale: config.layer_rope_scale(l as u32),
                rope_mscale: config.rope_attn_factor,
            };
            let fq = [w.wq.format, w.wk.format, w.wv.format];
            qkv_p.push(qkv_k[&fq].params(ctx, vecs, lv, &attention)?);
            att_p.push(att_k[&w.wo.format].params(ctx, vecs, lv, &attention)?);
            up_p.push(up_k[&[w.w_gate.format, w.w_up.format]].params(ctx, vecs, lv)?);
        }
        let qkv_u = uniform_array(ctx, "fused_qkv layers", &qkv_p);
        let att_u = uniform_array(ctx, "fused_attention layers", &att_p);
        let up_u = uniform_array(ctx, "fused_ffn_up layers", &up_p);
        let mut layers: Vec<FusedLayer> = Vec::with_capacity(weights.layers.len());
        for (l, w) in weights.layers.iter().enumerate() {
            let b = &buffers;
            let fq = [w.wq.format, w.wk.format, w.wv.format];
            let fu = [w.w_gate.format, w.w_up.format];
            // A role bound over stacked buffers has one bind group for every layer: layer 0's,
            // so a pass sets it once (the stacks have one format and shape for all layers).
            let first = layers.first();
            let qkv = match first {
                Some(f) if ix_qkv.shared(3, false) => f.qkv.clone(),
                _ => qkv_k[&fq].bind(
                    ctx,
                    &qkv_u,
                    &acts.state,
                    x,
                    vecs,
                    &w.wq,
                    &w.wk,
                    &w.wv,
                    &b.qkv,
                )?,
            };
            let attention = match first {
                Some(f) if ix_att.shared(1, true) => f.attention.clone(),
                _ => att_k[&w.wo.format].bind(
                    ctx,
                    &att_u,
                    &acts.state,
                    &b.qkv,
                    &acts.k_cache[l],
                    &acts.v_cache[l],
                    &w.wo,
                    &b.part,
                    vecs,
                )?,
            };
            let ffn_up = match first {
                Some(f) if ix_up.shared(2, false) => f.ffn_up.clone(),
                _ => up_k[&fu].bind(
                    ctx,
                    &up_u,
                    &acts.state,
                    x,
                    &b.part,
                    vecs,
                    &w.w_gate,
                    &w.w_up,
                    &b.x_mid,
                    &acts.hidden,
                )?,
            };
            let o_proj = match (first, o_k.get(&w.wo.format)) {
                (_, None) => None,
                (Some(f), Some(_)) if ix_att.shared(1, false) => f.o_proj.clone(),
                (_, Some(k)) => Some(k.bind(ctx, &acts.state, x, &b.part, &w.wo, &b.x_mid)?),
            };
            let ffn_down = match first {
                Some(f) if ix_down.shared(1, false) => f.ffn_down.clone(),
                _ => down_k[&w.w_down.format].bind(
                    ctx,
                    &acts.state,
                    &b.x_mid,
                    &acts.hidden,
                    &w.w_down,
                    x,
                    &b.qkv,
                    &acts.k_cache[l],
                    &acts.v_cache[l],
                )?,
            };
            let layer = FusedLayer {
                bytes: [
                    w.wq.gpu_bytes() + w.wk.gpu_bytes() + w.wv.gpu_bytes(),
                    w.wo.gpu_bytes(),
                    w.w_gate.gpu_bytes() + w.w_up.gpu_bytes(),
                    w.w_down.gpu_bytes(),
                ],
                qkv,
                attention,
                o_proj,
                ffn_up,
                ffn_down,
            };
            layers.push(layer);
        }
        let embed = Embed::new(ctx, weights.tok_embd.format)
            .await?
            .bind_scaled(
                ctx,
                &weights.tok_embd,
                config.embedding_scale,
                &acts.state,
                &acts.tokens,
                x,
                1,
            )?;
        let post_norm = match (&buffers.resid, buffers.vectors.layers.last()) {
            (Some(resid), Some(last)) => Some(FusedPostNorm::new(ctx, &s).await?.bind(
                ctx,
                &acts.state,
                resid,
                &buffers.vectors.buffer,
                last.post_ffn_norm,
                &acts.x,
            )?),
            _ => None,
        };
        Ok(Self {
            embed,
            embed_dispatches: weights.tok_embd.chunks().len() as u32,
            layers,
            post_norm,
            append_in_down: !s.arch.qk_norm,
            _buffers: buffers,
        })
    }

    /// Records one decode step's body (embed + layers) for a step that sees at most `max_len`
    /// positions (sizes the attention grid; extra chunk workgroups exit at once). `state`
    /// tracks what the pass has set across steps: the layer kernels' bind groups stay set at
    /// indices 0–3 (embed, the post norm and the head use index 0).
    pub(crate) fn record_body<'a>(
        &'a self,
        pass: &mut wgpu::ComputePass<'_>,
        state: &mut PassState<'a>,
        max_len: u32,
    ) -> Result<()> {
        self.embed.record(pass, 1)?;
        state.touched(0);
        for (i, l) in self.layers.iter().enumerate() {
            let layer = i as u32;
            l.qkv.record_layer(pass, state, layer);
            l.attention.record_layer(pass, state, layer, max_len);
            if let (Some(o), true) = (&l.o_proj, l.attention.splits(max_len)) {
                o.record_layer(pass, state, layer);
            }
            l.ffn_up.record_layer(pass, state, layer, max_len);
            l.ffn_down.record_layer(pass, state, layer);
        }
        if let Some(call) = &self.post_norm {
            call.record(pass);
            state.touched(0);
        }
        Ok(())
    }

    /// The body's dispatches one by one with their roles, for a step that sees `len`
    /// positions; `kv_bytes_per_position` is one layer's K+V bytes per position and KV head
    /// (attention's workgroups along x each read their KV head's chunk).
    pub fn roles(&self, len: u32, kv_bytes_per_position: u64) -> Vec<RoleCall<'_>> {
        let mut out = Vec::new();
        for (i, l) in self.layers.iter().enumerate() {
            let layer = i as u32;
            out.push(RoleCall {
                role: "norm+qkv+rope",
                bytes: l.bytes[0],
                record: Box::new(move |p| l.qkv.record_at(p, layer)),
            });
            out.push(RoleCall {
                role: if self.append_in_down {
                    "attention+o-proj"
                } else {
                    "kv-append+attention+o-proj"
                },
                bytes: l.bytes[1]
                    + kv_bytes_per_position * u64::from(len) * u64::from(l.attention.slots()),
                record: Box::new(move |p| {
                    l.attention.record(p, layer, len);
                    if let (Some(o), true) = (&l.o_proj, l.attention.splits(len)) {
                        o.record_at(p, layer);
                    }
                }),
            });
            out.push(RoleCall {
                role: "combine+norm+gate/up+swiglu",
                bytes: l.bytes[2],
                record: Box::new(move |p| l.ffn_up.record(p, layer, len)),
            });
            out.push(RoleCall {
                role: if self.append_in_down {
                    "down+residual+kv-append"
                } else {
                    "down+residual"
                },
                bytes: l.bytes[3],
                record: Box::new(move |p| l.ffn_down.record_at(p, layer)),
            });
        }
        if let Some(call) = &self.post_norm {
            out.push(RoleCall {
                role: "post-ffn norm (last layer)",
                bytes: 0,
                record: Box::new(move |p| call.record(p)),
            });
        }
        out
    }

    /// Dispatches of one body for a step that sees at most `max_len` positions (embed + 4
    /// per layer, 5 where `fused_ffn_up` splits its combine off, + the post norm of
    /// `POST_NORMS` models).
    pub fn body_dispatches(&self, max_len: u32) -> u32 {
        let layers: u32 = self
            .layers
            .iter()
            .map(|l| {
                let o_proj = l.o_proj.is_some() && l.attention.splits(max_len);
                3 + u32::from(o_proj) + l.ffn_up.dispatches(max_len)
            })
            .sum();
        self.embed_dispatches + layers + u32::from(self.post_norm.is_some())
    }
}

/// Everything the fused strategy needs: the decode step and the head + GPU sampler.
pub struct Fused {
    pub decode: FusedDecode,
    pub choice: Choice,
}

impl Fused {
    /// Binds both; a model beyond the fused kernels' limits gets the typed reason (and still
    /// runs with the unfused strategy).
    pub async fn bind(
        ctx: &GpuContext,
        config: &ModelConfig,
        weights: &ModelWeights,
        acts: &Activations,
        sampler: &SamplerBuffers,
        kv: KvFormat,
    ) -> Result<Self> {
        fused_shape(config, acts.n_ctx, ctx).check_device(ctx)?;
        Ok(Self {
            choice: Choice::bind(ctx, config, weights, acts, sampler).await?,
            decode: FusedDecode::bind(ctx, config, weights, acts, kv).await?,
        })
    }
}
