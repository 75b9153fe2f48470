//! The whole Llama forward pass on the CPU in plain f32 (llm.c style): weights dequantized once,
//! every op from [`crate::reference`]. Slow and simple on purpose — it is the ground truth the
//! GPU forward pass is tested against, not a way to run models.

use crate::error::{FuselmError, Result};
use crate::gguf::{
    dequantize_tensor, f16_to_f32, f32_to_f16, FfnActivation, GgmlType, Gguf, ModelConfig,
    RopeStyle,
};
use crate::reference::{
    add, argmax, geglu, matmul, rms_norm, rope_scaled, swiglu, windowed_attention, AttentionShape,
    RopeScale,
};

/// A dequantized weight and the type it was stored in (which decides how llama.cpp rounds the
/// activations it is multiplied with).
struct Mat {
    w: Vec<f32>,
    ty: GgmlType,
}

struct Layer {
    attn_norm: Vec<f32>,
    wq: Mat,
    wk: Mat,
    wv: Mat,
    wo: Mat,
    bq: Option<Vec<f32>>,
    bk: Option<Vec<f32>>,
    bv: Option<Vec<f32>>,
    bo: Option<Vec<f32>>,
    /// Per-head norms of Q and K (qwen3, gemma3).
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    /// Norms of the attention and FFN outputs (gemma3).
    post_attn_norm: Option<Vec<f32>>,
    post_ffn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    w_gate: Mat,
    w_up: Mat,
    w_down: Mat,
}

/// How the CPU reference rounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Numerics {
    /// Every op in f32 on the dequantized weights: the ground truth for the GPU kernels.
    ExactF32,
    /// As llama.cpp's CPU backend: activations quantized to 8 bits per block of 32 (f16 scale)
    /// before each product with a quantized weight, converted to f16 before an f16 weight, and
    /// an f16 KV cache with f16 queries and attention probabilities. Used to tell llama.cpp's
    /// rounding from bugs when comparing against its outputs.
    LlamaCpp,
}

fn round_f16(x: f32) -> f32 {
    f16_to_f32(f32_to_f16(x))
}

/// ggml's `quantize_row_q8_0`/`q8_1` then dequantize: per block of 32, `d = amax / 127`,
/// `q = round(x / d)`, value `q * f16(d)`.
fn round_q8(x: &[f32]) -> Vec<f32> {
    let mut out = Vec::with_capacity(x.len());
    for block in x.chunks(32) {
        let amax = block.iter().fold(0f32, |m, v| m.max(v.abs()));
        let d = amax / 127.0;
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let d16 = round_f16(d);
        out.extend(block.iter().map(|v| (v * id).round() * d16));
    }
    out
}

impl Numerics {
    /// The activation rows as the product with a weight of type `ty` sees them.
    fn activations(self, x: &[f32], ty: GgmlType) -> std::borrow::Cow<'_, [f32]> {
        match (self, ty) {
            (Numerics::ExactF32, _) | (_, GgmlType::F32) => x.into(),
            (Numerics::LlamaCpp, GgmlType::F16 | GgmlType::BF16) => {
                x.iter().map(|&v| round_f16(v)).collect::<Vec<_>>().into()
            }
            (Numerics::LlamaCpp, _) => round_q8(x).into(),
        }
    }

    fn f16(self, x: &mut [f32]) {
        if self == Numerics::LlamaCpp {
            x.iter_mut().for_each(|v| *v = round_f16(*v));
        }
    }
}

/// llama.cpp's CPU flash attention with an f16 KV cache (`ggml_compute_forward_flash_attn_ext_f16`):
/// Q·K in f32 over f16-rounded operands, online softmax, and the V accumulator kept in f16.
/// Plain causal attention with scale 1 / sqrt(head_dim): for comparing llama models with
/// llama.cpp's outputs (no sliding windows, no model-specific scale).
#[allow(clippy::too_many_arguments)]
fn attention_llama_cpp(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    pos0: usize,
    n_head: usize,
    n_head_kv: usize,
    head_dim: usize,
) -> Vec<f32> {
    let kv_row = n_head_kv * head_dim;
    let group = n_head / n_head_kv.max(1);
    let scale = 1.0 / (head_dim as f32).sqrt();
    let mut out = Vec::with_capacity(q.len());
    for (t, qt) in q.chunks(n_head * head_dim).enumerate() {
        for h in 0..n_head {
            let qh: Vec<f32> = qt[h * head_dim..(h + 1) * head_dim]
                .iter()
                .map(|&v| round_f16(v))
                .collect();
            let kv = (h / group) * head_dim;
            let (mut m, mut s) = (f32::NEG_INFINITY, 0f32);
            let mut acc = vec![0f32; head_dim]; // f16 values
            for p in 0..=pos0 + t {
                let kp = &keys[p * kv_row + kv..p * kv_row + kv + head_dim];
                let score = qh
                    .iter()
                    .zip(kp)
                    .map(|(a, b)| (*a as f64) * (*b as f64))
                    .sum::<f64>() as f32
                    * scale;
                let m_old = m;
                let (ms, vs) = if score > m {
                    m = score;
                    ((m_old - m).exp(), 1.0)
                } else {
                    (1.0, (score - m).exp())
                };
                if ms != 1.0 {
                    acc.iter_mut().for_each(|a| *a = round_f16(*a * ms));
                }
                let vp = &values[p * kv_row + kv..p * kv_row + kv + head_dim];
                for (a, v) in acc.iter_mut().zip(vp) {
                    *a = round_f16(*a + v * vs);
                }
                s = s * ms + vs;
            }
            out.extend(acc.iter().map(|a| a / s));
        }
    }
    out
}

/// `X · W^T` for `[n_tokens, k]` activations, rounding them as `numerics` says.
fn mat(numerics: Numerics, w: &Mat, x: &[f32], k: usize, n: usize) -> Vec<f32> {
    matmul(&w.w, &numerics.activations(x, w.ty), k, n)
}

/// A model held as dense f32 on the host, with its own KV cache.
pub struct CpuReferenceModel {
    pub config: ModelConfig,
    tok_embd: Mat,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    /// `None` when the output head is tied to `tok_embd`.
    output: Option<Mat>,
    /// Round like llama.cpp's CPU backend instead of computing in exact f32 (see [`Numerics`]).
    pub numerics: Numerics,
    /// Per layer, `[pos, n_head_kv * head_dim]` rows for K and for V.
    k_cache: Vec<Vec<f32>>,
    v_cache: Vec<Vec<f32>>,
    /// Per layer, the keys before RoPE (what a context shift rotates again).
    k_raw: Vec<Vec<f32>>,
    /// The RoPE frequency factors of the context size this model was made for
    /// ([`ModelConfig::rope_factors_tensor`]).
    rope_factors: Option<Vec<f32>>,
}

fn load(g: &Gguf, file: &[u8], name: &str) -> Result<Vec<f32>> {
    let t = g
        .tensor(name)
        .ok_or_else(|| crate::gguf::GgufError::MissingTensor { name: name.into() })?;
    Ok(dequantize_tensor(t, g.tensor_data(file, t)?)?)
}

fn load_mat(g: &Gguf, file: &[u8], name: &str) -> Result<Mat> {
    let ty = g
        .tensor(name)
        .ok_or_else(|| crate::gguf::GgufError::MissingTensor { name: name.into() })?
        .ggml_type()?;
    Ok(Mat {
        w: load(g, file, name)?,
        ty,
    })
}

/// The logical matrices of layer `i` named `want` (e.g. Q, K, V): each loaded by name, or,
/// where the file stores them as one tensor ([`ModelConfig::row_split`], phi3), that
/// tensor's rows divided among them.
fn load_layer_mats<const N: usize>(
    g: &Gguf,
    file: &[u8],
    config: &ModelConfig,
    i: u32,
    stored: &str,
    want: [&str; N],
) -> Result<[Mat; N]> {
    let name = |s: &str| format!("blk.{i}.{s}");
    let Some(parts) = config.row_split(stored) else {
        let mut out = Vec::with_capacity(N);
        for s in want {
            out.push(load_mat(g, file, &name(s))?);
        }
        return Ok(out.try_into().unwrap_or_else(|_| unreachable!()));
    };
    let whole = load_mat(g, file, &name(stored))?;
    let k = u64::from(config.n_embd) as usize;
    let mut out = Vec::with_capacity(N);
    for s in want {
        let (_, first, rows) = parts
            .iter()
            .find(|(part, _, _)| *part == s)
            .copied()
            .ok_or_else(|| crate::gguf::GgufError::MissingTensor { name: name(s) })?;
        out.push(Mat {
            w: whole.w[first as usize * k..(first + rows) as usize * k].to_vec(),
            ty: whole.ty,
        });
    }
    Ok(out.try_into().unwrap_or_else(|_| unreachable!()))
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
    /// The model for the GPU path's default context size, min(training context, 2048)
    /// (which picks Phi-3's LongRoPE factors).
    pub fn from_gguf(g: &Gguf, file: &[u8]) -> Result<Self> {
        let config = ModelConfig::from_gguf(g)?;
        let n_ctx = config.context_length.min(2048);
        Self::from_config(g, file, config, n_ctx)
    }

    /// The model for a KV cache of `n_ctx` positions (it picks Phi-3's long or short RoPE
    /// factors; nothing else depends on it).
    pub fn from_gguf_ctx(g: &Gguf, file: &[u8], n_ctx: u32) -> Result<Self> {
        Self::from_config(g, file, ModelConfig::from_gguf(g)?, n_ctx)
    }

    fn from_config(g: &Gguf, file: &[u8], config: ModelConfig, n_ctx: u32) -> Result<Self> {
        let rope_factors = match config.rope_factors_tensor(n_ctx) {
            Some(name) => Some(load(g, file, name)?),
            None => None,
        };
        let mut layers = Vec::new();
        for i in 0..config.n_layers {
            let name = |s: &str| format!("blk.{i}.{s}");
            let [wq, wk, wv] = load_layer_mats(
                g,
                file,
                &config,
                i,
                crate::gguf::FUSED_QKV,
                ["attn_q.weight", "attn_k.weight", "attn_v.weight"],
            )?;
            let [w_gate, w_up] = load_layer_mats(
                g,
                file,
                &config,
                i,
                "ffn_up.weight",
                ["ffn_gate.weight", "ffn_up.weight"],
            )?;
            layers.push(Layer {
                attn_norm: load(g, file, &name("attn_norm.weight"))?,
                wq,
                wk,
                wv,
                wo: load_mat(g, file, &name("attn_output.weight"))?,
                bq: load_opt(g, file, &name("attn_q.bias"))?,
                bk: load_opt(g, file, &name("attn_k.bias"))?,
                bv: load_opt(g, file, &name("attn_v.bias"))?,
                bo: load_opt(g, file, &name("attn_output.bias"))?,
                q_norm: load_opt(g, file, &name("attn_q_norm.weight"))?,
                k_norm: load_opt(g, file, &name("attn_k_norm.weight"))?,
                post_attn_norm: load_opt(g, file, &name("post_attention_norm.weight"))?,
                post_ffn_norm: load_opt(g, file, &name("post_ffw_norm.weight"))?,
                ffn_norm: load(g, file, &name("ffn_norm.weight"))?,
                w_gate,
                w_up,
                w_down: load_mat(g, file, &name("ffn_down.weight"))?,
            });
        }
        let n_layers = layers.len();
        Ok(Self {
            tok_embd: load_mat(g, file, "token_embd.weight")?,
            output_norm: load(g, file, "output_norm.weight")?,
            output: match g.tensor("output.weight") {
                Some(_) => Some(load_mat(g, file, "output.weight")?),
                None => None,
            },
            numerics: Numerics::ExactF32,
            layers,
            k_cache: vec![Vec::new(); n_layers],
            v_cache: vec![Vec::new(); n_layers],
            k_raw: vec![Vec::new(); n_layers],
            rope_factors,
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
        self.k_raw.iter_mut().for_each(Vec::clear);
    }

    /// Context shift (`model::context_shift`): drops the cached tokens `keep..keep + drop` and
    /// moves the later ones down; each moved key is its key before RoPE rotated afresh at its
    /// new position, values are kept as they are. The next `forward` continues at `n_past`.
    pub fn shift_context(&mut self, keep: usize, drop: usize) {
        let c = &self.config;
        let kv_dim = self.kv_dim();
        let (head_dim, n_rot) = (c.head_dim as usize, c.rope_dims as usize);
        let neox = c.rope_style == RopeStyle::NeoX;
        let range = keep * kv_dim..(keep + drop) * kv_dim;
        for l in 0..self.k_cache.len() {
            self.k_raw[l].drain(range.clone());
            self.v_cache[l].drain(range.clone());
            let (_, freq_base) = c.layer_attention(l as u32);
            let scale = RopeScale {
                factors: self.rope_factors.as_deref(),
                freq_scale: c.layer_rope_scale(l as u32),
                mscale: c.rope_attn_factor,
            };
            let mut k = self.k_raw[l].clone();
            for (pos, row) in k.chunks_mut(kv_dim).enumerate() {
                rope_scaled(row, head_dim, n_rot, pos as u32, freq_base, neox, scale);
            }
            self.numerics.f16(&mut k);
            self.k_cache[l] = k;
        }
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
                self.tok_embd.w[t * n_embd..(t + 1) * n_embd].to_vec()
            })
            .collect();
        if c.embedding_scale != 1.0 {
            x.iter_mut().for_each(|v| *v *= c.embedding_scale);
        }
        for (l, layer) in self.layers.iter().enumerate() {
            let (window, freq_base) = c.layer_attention(l as u32);
            let h = rms_norm(&x, &layer.attn_norm, c.rms_eps);
            let nm = self.numerics;
            let mut q = mat(nm, &layer.wq, &h, n_embd, q_dim);
            let mut k = mat(nm, &layer.wk, &h, n_embd, kv_dim);
            let mut v = mat(nm, &layer.wv, &h, n_embd, kv_dim);
            add_bias(&mut q, &layer.bq);
            add_bias(&mut k, &layer.bk);
            add_bias(&mut v, &layer.bv);
            // Per-head norms: every head_dim-long row of Q and K is normalised by itself.
            if let Some(w) = &layer.q_norm {
                q = rms_norm(&q, w, c.rms_eps);
            }
            if let Some(w) = &layer.k_norm {
                k = rms_norm(&k, w, c.rms_eps);
            }
            self.k_raw[l].extend_from_slice(&k);
            let scale = RopeScale {
                factors: self.rope_factors.as_deref(),
                freq_scale: c.layer_rope_scale(l as u32),
                mscale: c.rope_attn_factor,
            };
            for (t, (qt, kt)) in q.chunks_mut(q_dim).zip(k.chunks_mut(kv_dim)).enumerate() {
                let pos = (pos0 + t) as u32;
                rope_scaled(qt, head_dim, n_rot, pos, freq_base, neox, scale);
                rope_scaled(kt, head_dim, n_rot, pos, freq_base, neox, scale);
            }
            nm.f16(&mut k);
            nm.f16(&mut v);
            nm.f16(&mut q);
            self.k_cache[l].extend_from_slice(&k);
            self.v_cache[l].extend_from_slice(&v);
            let att = match nm {
                Numerics::ExactF32 => windowed_attention(
                    &q,
                    &self.k_cache[l],
                    &self.v_cache[l],
                    pos0,
                    &AttentionShape {
                        n_head,
                        n_head_kv,
                        head_dim,
                        scale: c.attention_scale,
                        window: window.map(|w| w as usize),
                    },
                ),
                Numerics::LlamaCpp => attention_llama_cpp(
                    &q,
                    &self.k_cache[l],
                    &self.v_cache[l],
                    pos0,
                    n_head,
                    n_head_kv,
                    head_dim,
                ),
            };
            let mut o = mat(nm, &layer.wo, &att, q_dim, n_embd);
            add_bias(&mut o, &layer.bo);
            if let Some(w) = &layer.post_attn_norm {
                o = rms_norm(&o, w, c.rms_eps);
            }
            x = add(&x, &o);
            let h = rms_norm(&x, &layer.ffn_norm, c.rms_eps);
            let gate = mat(nm, &layer.w_gate, &h, n_embd, n_ff);
            let up = mat(nm, &layer.w_up, &h, n_embd, n_ff);
            let act = match c.ffn_activation {
                FfnActivation::Silu => swiglu(&gate, &up),
                FfnActivation::GeluTanh => geglu(&gate, &up),
            };
            let mut down = mat(nm, &layer.w_down, &act, n_ff, n_embd);
            if let Some(w) = &layer.post_ffn_norm {
                down = rms_norm(&down, w, c.rms_eps);
            }
            x = add(&x, &down);
        }
        let h = rms_norm(&x, &self.output_norm, c.rms_eps);
        let head = self.output.as_ref().unwrap_or(&self.tok_embd);
        Ok(mat(self.numerics, head, &h, n_embd, c.vocab_size as usize))
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
