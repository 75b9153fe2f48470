//! The fused decode step: 4 dispatches per layer plus the head and the GPU sampler, every
//! per-token value (position, token id, penalty window, stop flag) on the GPU, so any number
//! of steps can be recorded back to back into one compute pass.
//!
//! Per step: embed (reads `tokens[pos]`), then per layer `fused_qkv`, `fused_attention`,
//! `fused_ffn_up`, `fused_ffn_down` (see `kernels::fused_layer` for the split), then
//! `head_logits`, `sample_select` (only when sampling) and `sample_choose`, which writes the
//! next token to `tokens`, advances `state` and raises `state.done` on a stop id — after which
//! every remaining recorded kernel returns at once.

use super::activations::Activations;
use super::gpu_weights::ModelWeights;
use crate::error::Result;
use crate::gguf::{ModelConfig, RopeStyle};
use crate::gpu::GpuContext;
use crate::kernels::sample::{head_groups, select_lists};
use crate::kernels::{
    Embed, EmbedCall, FusedAttention, FusedAttentionCall, FusedCall, FusedFfnDown, FusedFfnUp,
    FusedFfnUpCall, FusedQkv, FusedShape, HeadLogits, HeadLogitsCall, KvFormat, SampleCall,
    SampleChoose, SampleSelect, WeightFormat,
};
use crate::sampling::{SamplerParams, MAX_CANDIDATES};
use std::collections::HashMap;

/// GPU buffers the fused step and the GPU sampler use beyond [`Activations`].
pub struct SamplerBuffers {
    /// [`SamplerParams`], written by the host once per generation.
    pub params: wgpu::Buffer,
    /// `[vocab]` u32: occurrences of each id in the penalty window.
    pub counts: wgpu::Buffer,
    /// `[head groups]` (f32 bits, id): each head workgroup's best logit.
    pub best: wgpu::Buffer,
    /// `[lists, MAX_CANDIDATES]` (z bits, id): per-slice candidates.
    pub cand: wgpu::Buffer,
}

fn storage(ctx: &GpuContext, label: &str, bytes: u64) -> wgpu::Buffer {
    ctx.device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: bytes.max(16).div_ceil(16) * 16,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    })
}

impl SamplerBuffers {
    pub fn new(ctx: &GpuContext, weights: &ModelWeights, vocab: u32) -> Self {
        Self {
            params: storage(
                ctx,
                "sampler params",
                std::mem::size_of::<SamplerParams>() as u64,
            ),
            counts: storage(ctx, "penalty counts", u64::from(vocab) * 4),
            best: storage(
                ctx,
                "head bests",
                u64::from(head_groups(weights.head())) * 8,
            ),
            cand: storage(
                ctx,
                "sample candidates",
                u64::from(select_lists(vocab)) * u64::from(MAX_CANDIDATES) * 8,
            ),
        }
    }

    /// Bytes of these buffers.
    pub fn bytes(&self) -> u64 {
        [&self.params, &self.counts, &self.best, &self.cand]
            .into_iter()
            .map(|b| b.size())
            .sum()
    }
}

/// The geometry of `config` for the fused kernels.
pub fn fused_shape(c: &ModelConfig, n_ctx: u32) -> FusedShape {
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
    }
}

/// The end of a step (either strategy's fused path and the fused prefill): head, sampler.
pub struct Choice {
    head: HeadLogitsCall,
    select: SampleCall,
    choose: SampleCall,
    head_dispatches: u32,
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
        let choose = SampleChoose::new(ctx).await?.bind(
            ctx,
            head_groups(head_w),
            config.vocab_size,
            &acts.state,
            &s.params,
            &s.best,
            &s.cand,
            &acts.tokens,
            &s.counts,
        )?;
        Ok(Self {
            head,
            select,
            choose,
            head_dispatches: head_w.chunks().len() as u32,
        })
    }

    /// (role, record) of the head, the selection and the choice, for profiling.
    pub fn roles(&self, head_bytes: u64) -> Vec<RoleCall<'_>> {
        vec![
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
        ]
    }

    /// Head, candidate selection (when sampling), choice + bookkeeping.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, sampling: bool) {
        self.head.record(pass);
        if sampling {
            self.select.record(pass);
        }
        self.choose.record(pass);
    }

    pub fn dispatches(&self, sampling: bool) -> u32 {
        self.head_dispatches + u32::from(sampling) + 1
    }
}

/// One dispatch of a fused step, for profiling: its role and the bytes it must stream.
pub struct RoleCall<'a> {
    pub role: &'static str,
    pub bytes: u64,
    pub record: Box<dyn Fn(&mut wgpu::ComputePass<'_>) + 'a>,
}

struct FusedLayer {
    /// Weight bytes of (qkv, o, gate + up, down).
    bytes: [u64; 4],
    qkv: FusedCall,
    attention: FusedAttentionCall,
    ffn_up: FusedFfnUpCall,
    ffn_down: FusedCall,
}

/// Extra activations of the fused layers.
pub struct FusedBuffers {
    qkv: wgpu::Buffer,
    part: wgpu::Buffer,
    x_mid: wgpu::Buffer,
}

/// A bound fused decode step (one token).
pub struct FusedDecode {
    embed: EmbedCall,
    embed_dispatches: u32,
    layers: Vec<FusedLayer>,
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
        let s = fused_shape(config, acts.n_ctx);
        s.check()?;
        let buffers = FusedBuffers {
            qkv: storage(ctx, "fused qkv", u64::from(s.n_q() + 2 * s.n_kv()) * 4),
            part: storage(ctx, "fused attention partials", s.partials_len() * 4),
            x_mid: storage(ctx, "fused x_mid", u64::from(s.n_embd) * 4),
        };
        let mut qkv_k: HashMap<[WeightFormat; 3], FusedQkv> = HashMap::new();
        let mut att_k: HashMap<WeightFormat, FusedAttention> = HashMap::new();
        let mut up_k: HashMap<[WeightFormat; 2], FusedFfnUp> = HashMap::new();
        let mut down_k: HashMap<WeightFormat, FusedFfnDown> = HashMap::new();
        let mut layers = Vec::with_capacity(weights.layers.len());
        for (l, w) in weights.layers.iter().enumerate() {
            let fq = [w.wq.format, w.wk.format, w.wv.format];
            if let std::collections::hash_map::Entry::Vacant(e) = qkv_k.entry(fq) {
                e.insert(FusedQkv::new(ctx, &s, fq[0], fq[1], fq[2]).await?);
            }
            if let std::collections::hash_map::Entry::Vacant(e) = att_k.entry(w.wo.format) {
                e.insert(FusedAttention::new(ctx, &s, kv, w.wo.format).await?);
            }
            let fu = [w.w_gate.format, w.w_up.format];
            if let std::collections::hash_map::Entry::Vacant(e) = up_k.entry(fu) {
                e.insert(FusedFfnUp::new(ctx, &s, fu[0], fu[1]).await?);
            }
            if let std::collections::hash_map::Entry::Vacant(e) = down_k.entry(w.w_down.format) {
                e.insert(FusedFfnDown::new(ctx, &s, w.w_down.format).await?);
            }
            let b = &buffers;
            layers.push(FusedLayer {
                bytes: [
                    w.wq.gpu_bytes() + w.wk.gpu_bytes() + w.wv.gpu_bytes(),
                    w.wo.gpu_bytes(),
                    w.w_gate.gpu_bytes() + w.w_up.gpu_bytes(),
                    w.w_down.gpu_bytes(),
                ],
                qkv: qkv_k[&fq].bind(
                    ctx,
                    &acts.state,
                    &acts.x,
                    &w.attn_norm,
                    &w.wq,
                    &w.wk,
                    &w.wv,
                    &b.qkv,
                )?,
                attention: att_k[&w.wo.format].bind(
                    ctx,
                    &acts.state,
                    &b.qkv,
                    &acts.k_cache[l],
                    &acts.v_cache[l],
                    &w.wo,
                    &b.part,
                )?,
                ffn_up: up_k[&fu].bind(
                    ctx,
                    &acts.state,
                    &acts.x,
                    &b.part,
                    &w.ffn_norm,
                    &w.w_gate,
                    &w.w_up,
                    &b.x_mid,
                    &acts.hidden,
                )?,
                ffn_down: down_k[&w.w_down.format].bind(
                    ctx,
                    &acts.state,
                    &b.x_mid,
                    &acts.hidden,
                    &w.w_down,
                    &acts.x,
                )?,
            });
        }
        let embed = Embed::new(ctx, weights.tok_embd.format).await?.bind(
            ctx,
            &weights.tok_embd,
            &acts.state,
            &acts.tokens,
            &acts.x,
            1,
        )?;
        Ok(Self {
            embed,
            embed_dispatches: weights.tok_embd.chunks().len() as u32,
            layers,
            _buffers: buffers,
        })
    }

    /// Records one decode step's body (embed + layers) for a step that sees at most `max_len`
    /// positions (sizes the attention grid; extra chunk workgroups exit at once).
    pub fn record_body(&self, pass: &mut wgpu::ComputePass<'_>, max_len: u32) -> Result<()> {
        self.embed.record(pass, 1)?;
        for l in &self.layers {
            l.qkv.record(pass);
            l.attention.record(pass, max_len);
            l.ffn_up.record(pass, max_len);
            l.ffn_down.record(pass);
        }
        Ok(())
    }

    /// The body's dispatches one by one with their roles, for a step that sees `len`
    /// positions; `kv_bytes_per_position` is one layer's K+V bytes per position and head.
    pub fn roles(&self, len: u32, kv_bytes_per_position: u64, n_head: u64) -> Vec<RoleCall<'_>> {
        let mut out = Vec::new();
        for l in &self.layers {
            out.push(RoleCall {
                role: "norm+qkv+rope",
                bytes: l.bytes[0],
                record: Box::new(move |p| l.qkv.record(p)),
            });
            out.push(RoleCall {
                role: "kv-append+attention+o-proj",
                bytes: l.bytes[1] + kv_bytes_per_position * u64::from(len) * n_head,
                record: Box::new(move |p| l.attention.record(p, len)),
            });
            out.push(RoleCall {
                role: "combine+norm+gate/up+swiglu",
                bytes: l.bytes[2],
                record: Box::new(move |p| l.ffn_up.record(p, len)),
            });
            out.push(RoleCall {
                role: "down+residual",
                bytes: l.bytes[3],
                record: Box::new(move |p| l.ffn_down.record(p)),
            });
        }
        out
    }

    /// Dispatches of one body (embed + 4 per layer).
    pub fn body_dispatches(&self) -> u32 {
        self.embed_dispatches + 4 * self.layers.len() as u32
    }
}

/// Everything the fused strategy needs: the decode step and the head + GPU sampler.
pub struct Fused {
    pub decode: FusedDecode,
    pub choice: Choice,
}

/// The architecture switches the fused kernels implement: plain llama blocks. Models with
/// others (qwen2 biases, qwen3/gemma3 Q/K norms, gemma3's GELU, post norms, embedding scale and
/// sliding windows) run with the unfused strategy until the fused kernels learn them.
pub fn check_fused_supports(config: &ModelConfig) -> Result<()> {
    let mut missing = Vec::new();
    if config.qkv_bias || config.attn_output_bias {
        missing.push("attention biases");
    }
    if config.qk_norm {
        missing.push("Q/K norms");
    }
    if config.post_norms {
        missing.push("post-attention/FFN norms");
    }
    if config.ffn_activation != crate::gguf::FfnActivation::Silu {
        missing.push("GELU gates");
    }
    if config.embedding_scale != 1.0 {
        missing.push("embedding scaling");
    }
    if config.sliding_window.is_some() {
        missing.push("sliding-window attention");
    }
    if config.attention_scale != 1.0 / (config.head_dim as f32).sqrt() {
        missing.push("a model-specific attention scale");
    }
    if missing.is_empty() {
        return Ok(());
    }
    Err(crate::FuselmError::UnsupportedModel(format!(
        "architecture {}: the fused kernels do not implement {} yet (the unfused strategy does)",
        config.arch,
        missing.join(", ")
    )))
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
        check_fused_supports(config)?;
        fused_shape(config, acts.n_ctx).check()?;
        Ok(Self {
            choice: Choice::bind(ctx, config, weights, acts, sampler).await?,
            decode: FusedDecode::bind(ctx, config, weights, acts, kv).await?,
        })
    }
}
