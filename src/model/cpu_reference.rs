//! The whole Llama forward pass on the CPU in plain f32 (llm.c style): weights dequantized once,
//! every op from [`crate::reference`]. Slow and simple on purpose — it is the ground truth the
//! GPU forward pass is tested against, not a way to run models.

use crate::error::{FuselmError, Result};
use crate::gguf::{dequantize_tensor, Gguf, ModelConfig, RopeStyle};
use crate::reference::{add, argmax, causal_attention, matmul, rms_norm, rope, swiglu};

struct Layer {
    attn_norm: Vec<f32>,
    wq: Vec<f32>,
    wk: Vec<f32>,
    wv: Vec<f32>,
    wo: Vec<f32>,
    bq: Option<Vec<f32>>,
    bk: Option<Vec<f32>>,
    bv: Option<Vec<f32>>,
    bo: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    w_gate: Vec<f32>,
    w_up: Vec<f32>,
    w_down: Vec<f32>,
}

/// A model held as dense f32 on the host, with its own KV cache.
pub struct CpuReferenceModel {
    pub config: ModelConfig,
    tok_embd: Vec<f32>,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    /// `None` when the output head is tied to `tok_embd`.
    output: Option<Vec<f32>>,
    /// Per layer, `[pos, n_head_kv * head_dim]` rows for K and for V.
    k_cache: Vec<Vec<f32>>,
    v_cache: Vec<Vec<f32>>,
}

fn load(g: &Gguf, file: &[u8], name: &str) -> Result<Vec<f32>> {
    let t = g
        .tensor(name)
        .ok_or_else(|| crate::gguf::GgufError::MissingTensor { name: name.into() })?;
    Ok(dequantize_tensor(t, g.tensor_data(file, t)?)?)
}

fn load_opt(g: &Gguf, file: &[u8], name: &str) -> Result<Option<Vec<f32>>> {
    match g.tensor(name) {
        Some(_) => load(g, file, name).map(Some),
        None => Ok(None),
    }
}

/// Token ids must index the vocabulary; an empty step is a caller error.
pub(crate) fn check_tokens(tokens: &[u32], vocab_size: u32) -> Result<()> {
    if tokens.is_empty() {
        return Err(FuselmError::InvalidArgument("no tokens to run".into()));
    }
    if let Some(bad) = tokens.iter().find(|&&t| t >= vocab_size) {
        return Err(FuselmError::InvalidArgument(format!(
            "token id {bad} is outside the vocabulary (size {vocab_size})"
        )));
    }
    Ok(())
}

fn add_bias(x: &mut [f32], bias: &Option<Vec<f32>>) {
    if let Some(b) = bias {
        for row in x.chunks_mut(b.len()) {
            for (v, b) in row.iter_mut().zip(b) {
                *v += b;
            }
        }
    }
}

impl CpuReferenceModel {
    pub fn from_gguf(g: &Gguf, file: &[u8]) -> Result<Self> {
        let config = ModelConfig::from_gguf(g)?;
        let mut layers = Vec::new();
        for i in 0..config.n_layers {
            let name = |s: &str| format!("blk.{i}.{s}");
            layers.push(Layer {
                attn_norm: load(g, file, &name("attn_norm.weight"))?,
                wq: load(g, file, &name("attn_q.weight"))?,
                wk: load(g, file, &name("attn_k.weight"))?,
                wv: load(g, file, &name("attn_v.weight"))?,
                wo: load(g, file, &name("attn_output.weight"))?,
                bq: load_opt(g, file, &name("attn_q.bias"))?,
                bk: load_opt(g, file, &name("attn_k.bias"))?,
                bv: load_opt(g, file, &name("attn_v.bias"))?,
                bo: load_opt(g, file, &name("attn_output.bias"))?,
                ffn_norm: load(g, file, &name("ffn_norm.weight"))?,
                w_gate: load(g, file, &name("ffn_gate.weight"))?,
                w_up: load(g, file, &name("ffn_up.weight"))?,
                w_down: load(g, file, &name("ffn_down.weight"))?,
            });
        }
        let n_layers = layers.len();
        Ok(Self {
            tok_embd: load(g, file, "token_embd.weight")?,
            output_norm: load(g, file, "output_norm.weight")?,
            output: load_opt(g, file, "output.weight")?,
            layers,
            k_cache: vec![Vec::new(); n_layers],
            v_cache: vec![Vec::new(); n_layers],
            config,
        })
    }

    /// Tokens already in the KV cache.
    pub fn n_past(&self) -> usize {
        self.k_cache
            .first()
            .map_or(0, |k| k.len() / self.kv_dim().max(1))
    }

    fn kv_dim(&self) -> usize {
        (self.config.n_head_kv * self.config.head_dim) as usize
    }

    pub fn reset(&mut self) {
        self.k_cache.iter_mut().for_each(Vec::clear);
        self.v_cache.iter_mut().for_each(Vec::clear);
    }

    /// Runs `tokens` after what is cached; returns the logits of every token, `[n, vocab]`.
    pub fn forward(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        check_tokens(tokens, self.config.vocab_size)?;
        let c = &self.config;
        let (n_embd, n_ff) = (c.n_embd as usize, c.n_ff as usize);
        let (n_head, n_head_kv, head_dim) =
            (c.n_head as usize, c.n_head_kv as usize, c.head_dim as usize);
        let q_dim = n_head * head_dim;
        let kv_dim = n_head_kv * head_dim;
        let n_rot = c.rope_dims as usize;
        let neox = c.rope_style == RopeStyle::NeoX;
        let pos0 = self.n_past();

        let mut x: Vec<f32> = tokens
            .iter()
            .flat_map(|&t| {
                let t = t as usize;
                self.tok_embd[t * n_embd..(t + 1) * n_embd].to_vec()
            })
            .collect();
        for (l, layer) in self.layers.iter().enumerate() {
            let h = rms_norm(&x, &layer.attn_norm, c.rms_eps);
            let mut q = matmul(&layer.wq, &h, n_embd, q_dim);
            let mut k = matmul(&layer.wk, &h, n_embd, kv_dim);
            let mut v = matmul(&layer.wv, &h, n_embd, kv_dim);
            add_bias(&mut q, &layer.bq);
            add_bias(&mut k, &layer.bk);
            add_bias(&mut v, &layer.bv);
            for (t, (qt, kt)) in q.chunks_mut(q_dim).zip(k.chunks_mut(kv_dim)).enumerate() {
                let pos = (pos0 + t) as u32;
                rope(qt, head_dim, n_rot, pos, c.rope_freq_base, neox);
                rope(kt, head_dim, n_rot, pos, c.rope_freq_base, neox);
            }
            self.k_cache[l].extend_from_slice(&k);
            self.v_cache[l].extend_from_slice(&v);
            let att = causal_attention(
                &q,
                &self.k_cache[l],
                &self.v_cache[l],
                pos0,
                n_head,
                n_head_kv,
                head_dim,
            );
            let mut o = matmul(&layer.wo, &att, q_dim, n_embd);
            add_bias(&mut o, &layer.bo);
            x = add(&x, &o);
            let h = rms_norm(&x, &layer.ffn_norm, c.rms_eps);
            let gate = matmul(&layer.w_gate, &h, n_embd, n_ff);
            let up = matmul(&layer.w_up, &h, n_embd, n_ff);
            let down = matmul(&layer.w_down, &swiglu(&gate, &up), n_ff, n_embd);
            x = add(&x, &down);
        }
        let h = rms_norm(&x, &self.output_norm, c.rms_eps);
        let head = self.output.as_ref().unwrap_or(&self.tok_embd);
        Ok(matmul(head, &h, n_embd, c.vocab_size as usize))
    }

    /// Greedy continuation of `prompt` by `n` tokens (stops early at none: the caller decides).
    pub fn greedy(&mut self, prompt: &[u32], n: usize) -> Result<Vec<u32>> {
        let vocab = self.config.vocab_size as usize;
        let mut logits = self.forward(prompt)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let last = &logits[logits.len() - vocab..];
            let next = argmax(last).unwrap_or(0) as u32;
            out.push(next);
            logits = self.forward(&[next])?;
        }
        Ok(out)
    }
}
