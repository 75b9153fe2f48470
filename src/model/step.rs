//! One forward step (prefill of a token batch, or one decode token) as bound kernel calls that
//! record into a caller's compute pass: one dispatch per operation (~15 per layer). Positions
//! come from the `state` buffer and token ids from the `tokens` buffer. Every architecture switch
//! of `ModelConfig` (biases, Q/K norms, post norms, GELU, sliding windows) is implemented here,
//! each as its own dispatch where a model has it. This is the prefill of
//! every strategy (batched matmuls) and the decode step of the `unfused` strategy; the fused
//! decode step is `fused_step`.

use super::activations::Activations;
use super::gpu_weights::{LayerWeights, ModelWeights};
use super::profile::RoleCall;
use crate::error::Result;
use crate::gguf::{ModelConfig, RopeStyle as GgufRope};
use crate::gpu::GpuContext;
use crate::kernels::{
    Add, AddCall, Attention, AttentionCall, AttentionMask, AttentionShape, Embed, EmbedCall,
    GpuWeight, KvFormat, KvStore, KvStoreCall, MatMul, MatMulCall, MatVec, MatVecCall, RmsNorm,
    RmsNormCall, RmsRows, Rope, RopeCall, RopeExtension, RopeStyle, SwiGlu, SwiGluCall,
    WeightFormat,
};
use std::collections::HashMap;

/// Every compiled kernel a model needs (one matrix kernel per weight format present).
pub struct Kernels {
    embed: Embed,
    rms_norm: RmsNorm,
    matvec: HashMap<WeightFormat, MatVec>,
    matmul: HashMap<WeightFormat, MatMul>,
    rope: Rope,
    kv_store: KvStore,
    attention: Attention,
    swiglu: SwiGlu,
    add: Add,
}

impl Kernels {
    /// For batches of at most `max_batch` tokens (the prefill kernels' larger variants are
    /// compiled only where such a batch reaches them).
    pub async fn new(
        ctx: &GpuContext,
        weights: &ModelWeights,
        kv: KvFormat,
        head_dim: u32,
        max_batch: u32,
    ) -> Result<Self> {
        // Each format's most rows (the products' sizes decide the matmul variants).
        let mut most = HashMap::from([(weights.tok_embd.format, 0u32)]);
        let layers = weights
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]);
        for w in std::iter::once(weights.head()).chain(layers) {
            let m = most.entry(w.format).or_default();
            *m = (*m).max(w.n);
        }
        let mut matvec = HashMap::new();
        let mut matmul = HashMap::new();
        for (f, n) in most {
            matvec.insert(f, MatVec::new(ctx, f).await?);
            matmul.insert(f, MatMul::for_products(ctx, f, n, max_batch).await?);
        }
        Ok(Self {
            embed: Embed::new(ctx, weights.tok_embd.format).await?,
            rms_norm: RmsNorm::new(ctx).await?,
            matvec,
            matmul,
            rope: Rope::new(ctx).await?,
            kv_store: KvStore::new(ctx, kv).await?,
            attention: Attention::for_batches(ctx, kv, head_dim, max_batch).await?,
            swiglu: SwiGlu::new(ctx).await?,
            add: Add::new(ctx).await?,
        })
    }
}

/// A projection: matrix–vector for a one-token decode step, matrix–matrix for a batch.
enum Proj {
    Vec(MatVecCall),
    Mat(MatMulCall),
}

impl Proj {
    fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        match self {
            Proj::Vec(call) => {
                call.record(pass);
                Ok(())
            }
            Proj::Mat(call) => call.record(pass, n_tokens),
        }
    }
}

struct LayerCalls {
    attn_norm: RmsNormCall,
    q: Proj,
    k: Proj,
    v: Proj,
    /// Q/K/V biases (qwen2).
    qkv_bias: Vec<AddCall>,
    /// Per-head Q and K norms (qwen3, gemma3).
    qk_norm: Vec<RmsNormCall>,
    rope: RopeCall,
    kv_store: KvStoreCall,
    attention: AttentionCall,
    o: Proj,
    o_bias: Option<AddCall>,
    /// The attention output's norm before the residual add (gemma3).
    post_attn_norm: Option<RmsNormCall>,
    attn_residual: AddCall,
    ffn_norm: RmsNormCall,
    gate: Proj,
    up: Proj,
    swiglu: SwiGluCall,
    down: Proj,
    post_ffn_norm: Option<RmsNormCall>,
    ffn_residual: AddCall,
}

impl LayerCalls {
    /// Dispatches beyond the 8 fixed ones and the projections (biases, Q/K and post norms).
    fn extra_dispatches(&self) -> u32 {
        (self.qkv_bias.len()
            + self.qk_norm.len()
            + usize::from(self.o_bias.is_some())
            + usize::from(self.post_attn_norm.is_some())
            + usize::from(self.post_ffn_norm.is_some())) as u32
    }
}

/// What a step ends with.
enum Head {
    /// Final norm of the last token and the output head into `logits`.
    NextToken { norm: RmsNormCall, head: MatVecCall },
    /// Final norm and output head of every token into `logits_all` (teacher forcing, tests).
    AllLogits { norm: RmsNormCall, head: MatMulCall },
}

/// A bound forward step for batches of up to `max_tokens` tokens.
pub struct Step {
    embed: EmbedCall,
    layers: Vec<LayerCalls>,
    head: Head,
    dispatches: u32,
}

pub fn attention_shape(c: &ModelConfig, n_ctx: u32) -> AttentionShape {
    AttentionShape {
        n_head: c.n_head,
        n_head_kv: c.n_head_kv,
        head_dim: c.head_dim,
        n_ctx,
    }
}

/// Which projection kernel a step uses.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    Decode,
    Prefill,
    AllLogits,
}

struct Binder<'a> {
    ctx: &'a GpuContext,
    k: &'a Kernels,
    a: &'a Activations,
    batched: bool,
    max_tokens: u32,
    /// The RoPE frequency factors this KV cache's size uses, if the model has any.
    rope_factors: Option<&'a wgpu::Buffer>,
}

impl Binder<'_> {
    fn proj(&self, w: &GpuWeight, x: &wgpu::Buffer, y: &wgpu::Buffer) -> Result<Proj> {
        let missing = || crate::FuselmError::Gpu(format!("no kernel for {:?}", w.format));
        Ok(if self.batched {
            let mm = self.k.matmul.get(&w.format).ok_or_else(missing)?;
            Proj::Mat(mm.bind(self.ctx, w, &self.a.state, x, y, self.max_tokens)?)
        } else {
            let mv = self.k.matvec.get(&w.format).ok_or_else(missing)?;
            Proj::Vec(mv.bind(self.ctx, w, x, y)?)
        })
    }

    fn norm(
        &self,
        n: u32,
        eps: f32,
        rows: RmsRows,
        x: &wgpu::Buffer,
        w: &wgpu::Buffer,
        out: &wgpu::Buffer,
    ) -> Result<RmsNormCall> {
        self.k.rms_norm.bind(
            self.ctx,
            n,
            eps,
            rows,
            &self.a.state,
            x,
            w,
            out,
            self.max_tokens,
        )
    }

    fn layer(
        &self,
        c: &ModelConfig,
        shape: &AttentionShape,
        l: usize,
        w: &LayerWeights,
    ) -> Result<LayerCalls> {
        let (a, ctx, k, m) = (self.a, self.ctx, self.k, self.max_tokens);
        let style = match c.rope_style {
            GgufRope::Norm => RopeStyle::Normal,
            GgufRope::NeoX => RopeStyle::Neox,
        };
        let e = &w.extra;
        let (window, freq_base) = c.layer_attention(l as u32);
        let (q_dim, kv_dim) = (c.n_head * c.head_dim, c.n_head_kv * c.head_dim);
        // With Q/K norms the projections land in scratch buffers (`att` is free until attention
        // writes it) and the norms write `q` and `k`: a dispatch cannot read and write one buffer.
        let (q_out, k_out) = match (&e.q_norm, &e.k_norm, &a.k_raw) {
            (Some(_), Some(_), Some(k_raw)) => (&a.att, k_raw),
            _ => (&a.q, &a.k),
        };
        let mut qkv_bias = Vec::new();
        for (bias, out, n) in [
            (&e.bq, q_out, q_dim),
            (&e.bk, k_out, kv_dim),
            (&e.bv, &a.v, kv_dim),
        ] {
            if let Some(b) = bias {
                qkv_bias.push(k.add.bind_bias(ctx, n, &a.state, b, out, m)?);
            }
        }
        let mut qk_norm = Vec::new();
        if let (Some(qn), Some(kn)) = (&e.q_norm, &e.k_norm) {
            let heads = |n| RmsRows::PerHead(n);
            qk_norm.push(self.norm(c.head_dim, c.rms_eps, heads(c.n_head), q_out, qn, &a.q)?);
            qk_norm.push(self.norm(c.head_dim, c.rms_eps, heads(c.n_head_kv), k_out, kn, &a.k)?);
        }
        // With a post-attention/FFN norm, the normed output goes through `xn` (free then).
        let post = |norm: &Option<wgpu::Buffer>| -> Result<Option<RmsNormCall>> {
            norm.as_ref()
                .map(|n| self.norm(c.n_embd, c.rms_eps, RmsRows::All, &a.o, n, &a.xn))
                .transpose()
        };
        let (post_attn_norm, post_ffn_norm) = (post(&e.post_attn_norm)?, post(&e.post_ffn_norm)?);
        let attn_delta = if post_attn_norm.is_some() {
            &a.xn
        } else {
            &a.o
        };
        let ffn_delta = if post_ffn_norm.is_some() { &a.xn } else { &a.o };
        let mask = AttentionMask {
            scale: c.attention_scale,
            window,
        };
        Ok(LayerCalls {
            attn_norm: self.norm(c.n_embd, c.rms_eps, RmsRows::All, &a.x, &w.attn_norm, &a.xn)?,
            q: self.proj(&w.wq, &a.xn, q_out)?,
            k: self.proj(&w.wk, &a.xn, k_out)?,
            v: self.proj(&w.wv, &a.xn, &a.v)?,
            qkv_bias,
            qk_norm,
            rope: k.rope.bind(
                ctx,
                shape,
                c.rope_dims,
                freq_base,
                RopeExtension {
                    factors: self.rope_factors,
                    freq_scale: c.layer_rope_scale(l as u32),
                    mscale: c.rope_attn_factor,
                },
                style,
                &a.state,
                &a.q,
                &a.k,
                m,
            )?,
            kv_store: k.kv_store.bind(
                ctx,
                shape,
                &a.state,
                &a.k,
                &a.v,
                &a.k_cache[l],
                &a.v_cache[l],
                m,
            )?,
            attention: k.attention.bind_masked(
                ctx,
                shape,
                mask,
                &a.state,
                &a.q,
                &a.k_cache[l],
                &a.v_cache[l],
                &a.att,
                m,
            )?,
            o: self.proj(&w.wo, &a.att, &a.o)?,
            o_bias: e
                .bo
                .as_ref()
                .map(|b| k.add.bind_bias(ctx, c.n_embd, &a.state, b, &a.o, m))
                .transpose()?,
            post_attn_norm,
            attn_residual: k.add.bind(ctx, c.n_embd, &a.state, attn_delta, &a.x, m)?,
            ffn_norm: self.norm(c.n_embd, c.rms_eps, RmsRows::All, &a.x, &w.ffn_norm, &a.xn)?,
            gate: self.proj(&w.w_gate, &a.xn, &a.gate)?,
            up: self.proj(&w.w_up, &a.xn, &a.up)?,
            swiglu: k.swiglu.bind_activation(
                ctx,
                c.n_ff,
                c.ffn_activation,
                &a.state,
                &a.gate,
                &a.up,
                &a.hidden,
                m,
            )?,
            down: self.proj(&w.w_down, &a.hidden, &a.o)?,
            post_ffn_norm,
            ffn_residual: k.add.bind(ctx, c.n_embd, &a.state, ffn_delta, &a.x, m)?,
        })
    }
}

impl Step {
    pub fn bind(
        ctx: &GpuContext,
        kernels: &Kernels,
        weights: &ModelWeights,
        acts: &Activations,
        config: &ModelConfig,
        kind: StepKind,
    ) -> Result<Self> {
        let max_tokens = if kind == StepKind::Decode {
            1
        } else {
            acts.max_batch
        };
        let b = Binder {
            ctx,
            k: kernels,
            a: acts,
            batched: kind != StepKind::Decode,
            max_tokens,
            rope_factors: weights.rope_factors_for(config, acts.n_ctx),
        };
        let shape = attention_shape(config, acts.n_ctx);
        let layers = weights
            .layers
            .iter()
            .enumerate()
            .map(|(i, w)| b.layer(config, &shape, i, w))
            .collect::<Result<Vec<_>>>()?;
        let head =
            if kind == StepKind::AllLogits {
                let logits_all = acts.logits_all.as_ref().ok_or_else(|| {
                    crate::FuselmError::InvalidArgument("all-logits buffer not allocated".into())
                })?;
                let mm = kernels.matmul.get(&weights.head().format).ok_or_else(|| {
                    crate::FuselmError::Gpu("no kernel for the output head".into())
                })?;
                Head::AllLogits {
                    norm: b.norm(
                        config.n_embd,
                        config.rms_eps,
                        RmsRows::All,
                        &acts.x,
                        &weights.output_norm,
                        &acts.xn,
                    )?,
                    head: mm.bind(
                        ctx,
                        weights.head(),
                        &acts.state,
                        &acts.xn,
                        logits_all,
                        max_tokens,
                    )?,
                }
            } else {
                let mv = kernels.matvec.get(&weights.head().format).ok_or_else(|| {
                    crate::FuselmError::Gpu("no kernel for the output head".into())
                })?;
                Head::NextToken {
                    norm: b.norm(
                        config.n_embd,
                        config.rms_eps,
                        RmsRows::Last,
                        &acts.x,
                        &weights.output_norm,
                        &acts.x_last,
                    )?,
                    head: mv.bind(ctx, weights.head(), &acts.x_last, &acts.logits)?,
                }
            };
        let chunks = |w: &GpuWeight| w.chunks().len() as u32;
        let per_layer: u32 = layers
            .iter()
            .zip(&weights.layers)
            .map(|(calls, l)| {
                8 + calls.extra_dispatches()
                    + [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
                        .into_iter()
                        .map(chunks)
                        .sum::<u32>()
            })
            .sum();
        Ok(Self {
            dispatches: chunks(&weights.tok_embd) + per_layer + 1 + chunks(weights.head()),
            embed: kernels.embed.bind_scaled(
                ctx,
                &weights.tok_embd,
                config.embedding_scale,
                &acts.state,
                &acts.tokens,
                &acts.x,
                max_tokens,
            )?,
            layers,
            head,
        })
    }

    /// Dispatches of one [`Step::record`] (a split weight costs one per chunk).
    pub fn dispatches(&self) -> u32 {
        self.dispatches
    }

    /// Records the layers for `n_tokens` tokens (the count `state.n_tokens` will hold).
    pub fn record_body(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        self.embed.record(pass, n_tokens)?;
        for l in &self.layers {
            l.attn_norm.record(pass, n_tokens)?;
            l.q.record(pass, n_tokens)?;
            l.k.record(pass, n_tokens)?;
            l.v.record(pass, n_tokens)?;
            for call in l.qkv_bias.iter() {
                call.record(pass, n_tokens)?;
            }
            for call in l.qk_norm.iter() {
                call.record(pass, n_tokens)?;
            }
            l.rope.record(pass, n_tokens)?;
            l.kv_store.record(pass, n_tokens)?;
            l.attention.record(pass, n_tokens)?;
            l.o.record(pass, n_tokens)?;
            if let Some(call) = &l.o_bias {
                call.record(pass, n_tokens)?;
            }
            if let Some(call) = &l.post_attn_norm {
                call.record(pass, n_tokens)?;
            }
            l.attn_residual.record(pass, n_tokens)?;
            l.ffn_norm.record(pass, n_tokens)?;
            l.gate.record(pass, n_tokens)?;
            l.up.record(pass, n_tokens)?;
            l.swiglu.record(pass, n_tokens)?;
            l.down.record(pass, n_tokens)?;
            if let Some(call) = &l.post_ffn_norm {
                call.record(pass, n_tokens)?;
            }
            l.ffn_residual.record(pass, n_tokens)?;
        }
        Ok(())
    }

    /// The body's dispatches one by one with their roles, for a batch of `n_tokens` tokens
    /// (at most the batch it was bound for; the profiler times each alone). A matrix role's
    /// bytes are its weights' (read once per 32-token tile column).
    pub fn roles(&self, weights: &ModelWeights, n_tokens: u32) -> Vec<RoleCall<'_>> {
        // Recording fails only for a batch past `max_tokens`, which the caller checks.
        fn call<'a>(
            out: &mut Vec<RoleCall<'a>>,
            role: &'static str,
            bytes: u64,
            record: impl Fn(&mut wgpu::ComputePass<'_>) -> Result<()> + 'a,
        ) {
            out.push(RoleCall {
                role,
                bytes,
                record: Box::new(move |p| {
                    let _ = record(p);
                }),
            });
        }
        let n = n_tokens;
        let mut out = Vec::new();
        call(&mut out, "embed", 0, move |p| self.embed.record(p, n));
        for (l, w) in self.layers.iter().zip(&weights.layers) {
            call(&mut out, "rms-norm", 0, move |p| l.attn_norm.record(p, n));
            call(&mut out, "matmul q/k/v", w.wq.gpu_bytes(), move |p| {
                l.q.record(p, n)
            });
            call(&mut out, "matmul q/k/v", w.wk.gpu_bytes(), move |p| {
                l.k.record(p, n)
            });
            call(&mut out, "matmul q/k/v", w.wv.gpu_bytes(), move |p| {
                l.v.record(p, n)
            });
            for c in &l.qkv_bias {
                call(&mut out, "bias", 0, move |p| c.record(p, n));
            }
            for c in &l.qk_norm {
                call(&mut out, "rms-norm", 0, move |p| c.record(p, n));
            }
            call(&mut out, "rope", 0, move |p| l.rope.record(p, n));
            call(&mut out, "kv-store", 0, move |p| l.kv_store.record(p, n));
            call(&mut out, "attention", 0, move |p| l.attention.record(p, n));
            call(&mut out, "matmul o", w.wo.gpu_bytes(), move |p| {
                l.o.record(p, n)
            });
            if let Some(c) = &l.o_bias {
                call(&mut out, "bias", 0, move |p| c.record(p, n));
            }
            if let Some(c) = &l.post_attn_norm {
                call(&mut out, "rms-norm", 0, move |p| c.record(p, n));
            }
            call(&mut out, "residual", 0, move |p| {
                l.attn_residual.record(p, n)
            });
            call(&mut out, "rms-norm", 0, move |p| l.ffn_norm.record(p, n));
            call(&mut out, "matmul gate/up", w.w_gate.gpu_bytes(), move |p| {
                l.gate.record(p, n)
            });
            call(&mut out, "matmul gate/up", w.w_up.gpu_bytes(), move |p| {
                l.up.record(p, n)
            });
            call(&mut out, "swiglu", 0, move |p| l.swiglu.record(p, n));
            call(&mut out, "matmul down", w.w_down.gpu_bytes(), move |p| {
                l.down.record(p, n)
            });
            if let Some(c) = &l.post_ffn_norm {
                call(&mut out, "rms-norm", 0, move |p| c.record(p, n));
            }
            call(&mut out, "residual", 0, move |p| {
                l.ffn_residual.record(p, n)
            });
        }
        out
    }

    /// Records the whole step: layers, then the head (the last token's logits, or every
    /// token's logits).
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tokens: u32) -> Result<()> {
        self.record_body(pass, n_tokens)?;
        match &self.head {
            Head::NextToken { norm, head } => {
                norm.record(pass, n_tokens)?;
                head.record(pass);
            }
            Head::AllLogits { norm, head } => {
                norm.record(pass, n_tokens)?;
                head.record(pass, n_tokens)?;
            }
        }
        Ok(())
    }
}
