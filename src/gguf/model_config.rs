//! Model description of a llama-family GGUF (llama, qwen2, qwen3, gemma3, phi3) from its metadata,
//! validated against the tensor directory so that a loader can trust every shape it reads.
//!
//! The architectures differ only in a few switches, each a field here: RoPE pairing, Q/K/V
//! biases (qwen2), per-head Q/K RMS norms (qwen3, gemma3), and Gemma 3's embedding scale, GELU
//! gate, norms after attention and FFN, and sliding-window layers with their own RoPE base.
//! Phi-3 stores Q, K and V as one matrix (`attn_qkv`) and gate and up as one (`ffn_up`, gate
//! first): [`ModelConfig::row_split`] says which rows of a stored tensor are which logical one,
//! so everything past the loader sees the llama layout.
//!
//! Key names and defaults follow llama.cpp (`llama-model.cpp` / `llama-arch.cpp`): keys are
//! prefixed with the architecture, e.g. `llama.block_count`.

use serde::{Deserialize, Serialize};

use super::error::GgufError;
use super::reader::Gguf;

/// How rotary embeddings pair dimensions (llama.cpp `llama_model_rope_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RopeStyle {
    /// Adjacent pairs (`x[2i]`, `x[2i+1]`); llama.
    Norm,
    /// Halves (`x[i]`, `x[i + d/2]`); qwen2 (GPT-NeoX style).
    NeoX,
}

/// The FFN's gate activation: `act(gate) * up`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FfnActivation {
    /// SwiGLU: `silu(gate) * up` (llama, qwen).
    Silu,
    /// GeGLU with the tanh approximation of GELU (gemma: `gelu_pytorch_tanh`, ggml's `gelu`).
    GeluTanh,
}

/// Local attention layers (Gemma 3): layer `il` attends only to the last `window` positions
/// unless `(il + 1) % pattern == 0`, and rotates with `rope_freq_base` instead of the model's.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SlidingWindow {
    /// A query at position p sees keys at p - window < q <= p.
    pub window: u32,
    /// Every `pattern`-th layer is global.
    pub pattern: u32,
    pub rope_freq_base: f32,
}

/// RoPE context scaling declared in the metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RopeScaling {
    /// `{arch}.rope.scaling.type` ("linear", "yarn", ...); "linear" if absent, as llama.cpp.
    pub kind: String,
    /// `{arch}.rope.scaling.factor` (or legacy `{arch}.rope.scale_linear`).
    pub factor: f32,
    pub original_context_length: Option<u32>,
}

/// Hyper-parameters and layout facts of a llama-family model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelConfig {
    pub arch: String,
    pub n_layers: u32,
    pub n_embd: u32,
    pub n_ff: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub head_dim: u32,
    pub rope_freq_base: f32,
    pub rope_dims: u32,
    pub rope_style: RopeStyle,
    pub rope_scaling: Option<RopeScaling>,
    pub rms_eps: f32,
    pub context_length: u32,
    pub vocab_size: u32,
    /// No `output.weight`: the LM head reuses `token_embd.weight`.
    pub tied_output: bool,
    /// Every layer has `attn_q.bias`, `attn_k.bias`, `attn_v.bias` (always for qwen2).
    pub qkv_bias: bool,
    /// Every layer has `attn_output.bias` (optional in llama).
    pub attn_output_bias: bool,
    /// A `rope_freqs.weight` tensor (llama 3.1 frequency factors, `[rope_dims / 2]`) exists.
    pub rope_freqs: bool,
    /// Phi-3's LongRoPE: `rope_factors_long.weight` and `rope_factors_short.weight` exist
    /// (`[rope_dims / 2]` each); this is the context length above which the long ones apply
    /// (`{arch}.rope.scaling.original_context_length`, else the training context).
    pub long_rope: Option<u32>,
    /// `{arch}.rope.scaling.attn_factor`: cos and sin are multiplied by it (1 if absent).
    pub rope_attn_factor: f32,
    /// Per-head RMS norms of Q and K before RoPE (`attn_q_norm`, `attn_k_norm`, `[head_dim]`):
    /// qwen3 and gemma3.
    pub qk_norm: bool,
    /// RMS norms of the attention and FFN outputs before each residual add
    /// (`post_attention_norm`, `post_ffw_norm`): gemma3.
    pub post_norms: bool,
    pub ffn_activation: FfnActivation,
    /// The token embedding is multiplied by this (gemma3: sqrt(n_embd); else 1).
    pub embedding_scale: f32,
    /// Attention scores are multiplied by this (1 / sqrt(head_dim) but for Gemma 3 27B).
    pub attention_scale: f32,
    pub sliding_window: Option<SlidingWindow>,
    /// Q, K and V stored as one `attn_qkv.weight`, `[n_embd, n_q + 2 n_kv]` (phi3).
    pub fused_qkv: bool,
    /// Gate and up stored as one `ffn_up.weight`, `[n_embd, 2 n_ff]`, gate first (phi3).
    pub fused_gate_up: bool,
}

/// Per-layer tensor suffixes, in the order a loader typically wants them.
pub const LAYER_TENSORS: [&str; 9] = [
    "attn_norm.weight",
    "attn_q.weight",
    "attn_k.weight",
    "attn_v.weight",
    "attn_output.weight",
    "ffn_norm.weight",
    "ffn_gate.weight",
    "ffn_up.weight",
    "ffn_down.weight",
];

/// RoPE frequency factors of Llama 3.x (`[rope_dims / 2]`, dividing each pair's angle).
pub const ROPE_FREQS: &str = "rope_freqs.weight";
/// Phi-3 LongRoPE's factors for contexts beyond the original length, and within it.
pub const ROPE_FACTORS_LONG: &str = "rope_factors_long.weight";
pub const ROPE_FACTORS_SHORT: &str = "rope_factors_short.weight";

/// A stored per-layer tensor that holds several logical ones (phi3's `attn_qkv`).
pub const FUSED_QKV: &str = "attn_qkv.weight";

/// Full name of a per-layer tensor, e.g. `layer_tensor(3, "attn_q.weight")`.
pub fn layer_tensor(layer: u32, suffix: &str) -> String {
    format!("blk.{layer}.{suffix}")
}

fn invalid(key: &str, reason: impl Into<String>) -> GgufError {
    GgufError::InvalidValue {
        key: key.to_string(),
        reason: reason.into(),
    }
}

fn positive(g: &Gguf, key: &str) -> Result<u32, GgufError> {
    let v = g.metadata().get_u32(key)?;
    if v == 0 {
        return Err(invalid(key, "must be positive"));
    }
    Ok(v)
}

fn positive_f32(key: &str, v: f32) -> Result<f32, GgufError> {
    if !(v.is_finite() && v > 0.0) {
        return Err(invalid(key, format!("{v} is not a positive finite number")));
    }
    Ok(v)
}

impl ModelConfig {
    /// The attention window and RoPE base of layer `il`: `(Some(window), local base)` for a
    /// sliding-window layer, `(None, rope_freq_base)` for a global one.
    pub fn layer_attention(&self, il: u32) -> (Option<u32>, f32) {
        match self.sliding_window {
            Some(sw) if (il + 1) % sw.pattern != 0 => (Some(sw.window), sw.rope_freq_base),
            _ => (None, self.rope_freq_base),
        }
    }

    /// The RoPE angle scale of layer `il`: [`rope_freq_scale`](Self::rope_freq_scale) on
    /// global layers, 1 on sliding-window ones (llama.cpp: Gemma 3's local layers keep their own
    /// base and no scaling); 1 where the scaling is not implemented (the model is refused).
    pub fn layer_rope_scale(&self, il: u32) -> f32 {
        match self.layer_attention(il) {
            (Some(_), _) => 1.0,
            (None, _) => self.rope_freq_scale().unwrap_or(1.0),
        }
    }

    /// Reads and validates the model description; see the module docs.
    pub fn from_gguf(g: &Gguf) -> Result<ModelConfig, GgufError> {
        let md = g.metadata();
        let arch = md.get_str("general.architecture")?.to_string();
        let rope_style = match arch.as_str() {
            "llama" => RopeStyle::Norm,
            "qwen2" | "qwen3" | "gemma3" | "phi3" => RopeStyle::NeoX,
            _ => return Err(GgufError::UnsupportedArchitecture { arch }),
        };
        let gemma = arch == "gemma3";
        let k = |s: &str| format!("{arch}.{s}");

        let n_layers = positive(g, &k("block_count"))?;
        let n_embd = positive(g, &k("embedding_length"))?;
        let n_ff = positive(g, &k("feed_forward_length"))?;
        let n_head = positive(g, &k("attention.head_count"))?;
        let n_head_kv = match md.opt(&k("attention.head_count_kv"), |m, key| m.get_u32(key))? {
            None => n_head,
            Some(0) => return Err(invalid(&k("attention.head_count_kv"), "must be positive")),
            Some(v) => v,
        };
        if n_head % n_head_kv != 0 {
            return Err(invalid(
                &k("attention.head_count_kv"),
                format!("{n_head} query heads are not a multiple of {n_head_kv} kv heads"),
            ));
        }
        let head_dim = match md.opt(&k("attention.key_length"), |m, key| m.get_u32(key))? {
            Some(0) => return Err(invalid(&k("attention.key_length"), "must be positive")),
            Some(v) => v,
            None if n_embd % n_head != 0 => {
                return Err(invalid(
                    &k("attention.head_count"),
                    format!("embedding length {n_embd} is not divisible by {n_head} heads"),
                ));
            }
            None => n_embd / n_head,
        };
        if let Some(v) = md.opt(&k("attention.value_length"), |m, key| m.get_u32(key))? {
            if v != head_dim {
                return Err(invalid(
                    &k("attention.value_length"),
                    format!("{v} differs from key length {head_dim}"),
                ));
            }
        }
        let rope_freq_base = match md.opt(&k("rope.freq_base"), |m, key| m.get_f32(key))? {
            Some(v) => positive_f32(&k("rope.freq_base"), v)?,
            None => 10_000.0,
        };
        let rope_dims = md
            .opt(&k("rope.dimension_count"), |m, key| m.get_u32(key))?
            .unwrap_or(head_dim);
        if rope_dims == 0 || rope_dims > head_dim || rope_dims % 2 != 0 {
            return Err(invalid(
                &k("rope.dimension_count"),
                format!("{rope_dims} must be even and in 2..={head_dim}"),
            ));
        }
        let rms_key = k("attention.layer_norm_rms_epsilon");
        let rms_eps = positive_f32(&rms_key, md.get_f32(&rms_key)?)?;
        let context_length = positive(g, &k("context_length"))?;
        let rope_scaling = read_rope_scaling(g, &arch)?;

        let embd = g
            .tensor("token_embd.weight")
            .ok_or_else(|| GgufError::MissingTensor {
                name: "token_embd.weight".into(),
            })?;
        let vocab_size = match md.get("tokenizer.ggml.tokens") {
            Some(_) => md.get_str_array("tokenizer.ggml.tokens")?.len() as u64,
            None => embd.dims.get(1).copied().unwrap_or(0),
        };
        let vocab_size = u32::try_from(vocab_size)
            .ok()
            .filter(|&v| v > 0)
            .ok_or_else(|| {
                invalid(
                    "tokenizer.ggml.tokens",
                    format!("vocabulary size {vocab_size} is not in 1..2^32"),
                )
            })?;

        let sliding_window = if gemma {
            // llama.cpp (llama-model.cpp, LLM_ARCH_GEMMA3): every 6th layer is global, local
            // layers rotate with base 10000; the window itself is in the metadata.
            let key = k("attention.sliding_window");
            let window = md.get_u32(&key)?;
            if window == 0 {
                return Err(invalid(&key, "must be positive"));
            }
            Some(SlidingWindow {
                window,
                pattern: 6,
                rope_freq_base: 10_000.0,
            })
        } else {
            None
        };
        // Gemma 3 27B (62 layers) scales by its query_pre_attn_scalar = n_embd / n_head.
        let attention_scale = if gemma && n_layers == 62 {
            1.0 / ((n_embd / n_head) as f32).sqrt()
        } else {
            1.0 / (head_dim as f32).sqrt()
        };

        let layer_has = |suffix: &str| g.tensor(&layer_tensor(0, suffix)).is_some();
        // llama.cpp's converter writes Phi-3's original context length without a scaling
        // type or factor (so `rope_scaling` is None): read it on its own.
        let original_context = md.opt(&k("rope.scaling.original_context_length"), |m, key| {
            m.get_u32(key)
        })?;
        let long_rope = (g.tensor(ROPE_FACTORS_LONG).is_some()
            || g.tensor(ROPE_FACTORS_SHORT).is_some())
        .then(|| original_context.unwrap_or(context_length));
        let attn_key = k("rope.scaling.attn_factor");
        let rope_attn_factor = match md.opt(&attn_key, |m, key| m.get_f32(key))? {
            Some(v) => positive_f32(&attn_key, v)?,
            None => 1.0,
        };
        // llama.cpp (LLM_ARCH_PHI3) loads attn_qkv when present, else separate Q/K/V; its FFN
        // is always one up matrix of 2 n_ff rows (gate first). Its sliding window is ignored
        // there ("Phi SWA is currently disabled"), so it is here.
        let phi3 = arch == "phi3";
        let mut cfg = ModelConfig {
            fused_qkv: phi3 && layer_has(FUSED_QKV),
            fused_gate_up: phi3,
            rope_style,
            n_layers,
            n_embd,
            n_ff,
            n_head,
            n_head_kv,
            head_dim,
            rope_freq_base,
            rope_dims,
            rope_scaling,
            rms_eps,
            context_length,
            vocab_size,
            tied_output: g.tensor("output.weight").is_none(),
            qkv_bias: arch == "qwen2" || layer_has("attn_q.bias"),
            attn_output_bias: layer_has("attn_output.bias"),
            rope_freqs: g.tensor(ROPE_FREQS).is_some(),
            long_rope,
            rope_attn_factor,
            qk_norm: arch == "qwen3" || gemma,
            post_norms: gemma,
            ffn_activation: if gemma {
                FfnActivation::GeluTanh
            } else {
                FfnActivation::Silu
            },
            embedding_scale: if gemma { (n_embd as f32).sqrt() } else { 1.0 },
            attention_scale,
            sliding_window,
            arch,
        };
        cfg.qkv_bias |= layer_has("attn_k.bias") || layer_has("attn_v.bias");
        cfg.validate_tensors(g)?;
        Ok(cfg)
    }

    /// The angle scale of RoPE (`freq_scale`, llama.cpp's `rope_freq_scale_train`): 1 /
    /// factor for linear scaling, 1 without scaling. Sliding-window layers keep 1
    /// ([`layer_attention`](Self::layer_attention)). `None` for a scaling type the kernels do
    /// not implement (YaRN and others: they change the angles by more than a scale).
    pub fn rope_freq_scale(&self) -> Option<f32> {
        match &self.rope_scaling {
            None => Some(1.0),
            Some(s) if s.kind == "linear" => Some(1.0 / s.factor),
            Some(_) => None,
        }
    }

    /// The frequency-factor tensor RoPE divides each pair's angle by for a KV cache of
    /// `n_ctx` positions: Llama 3's `rope_freqs`, or Phi-3's long factors when `n_ctx` is
    /// beyond the original context (llama.cpp chooses by the context size too) and its short
    /// ones otherwise; `None` without factors.
    pub fn rope_factors_tensor(&self, n_ctx: u32) -> Option<&'static str> {
        if self.rope_freqs {
            return Some(ROPE_FREQS);
        }
        self.long_rope.map(|original| {
            if n_ctx > original {
                ROPE_FACTORS_LONG
            } else {
                ROPE_FACTORS_SHORT
            }
        })
    }

    /// Whether RoPE here is more than `pos * base^(-2i / n_rot)`: frequency factors, a
    /// scaled angle or an attention factor.
    pub fn rope_extended(&self) -> bool {
        self.rope_freqs
            || self.long_rope.is_some()
            || self.rope_attn_factor != 1.0
            || self.rope_scaling.is_some()
    }

    /// The logical tensors a stored per-layer tensor holds, by rows: `(suffix, first row,
    /// rows)`, or `None` when it is one tensor as stored. Rows are whole (each row of a
    /// quantized matrix is whole blocks), so a part is a byte range of the stored data.
    pub fn row_split(&self, suffix: &str) -> Option<Vec<(&'static str, u64, u64)>> {
        let q = u64::from(self.n_head) * u64::from(self.head_dim);
        let kv = u64::from(self.n_head_kv) * u64::from(self.head_dim);
        let ff = u64::from(self.n_ff);
        match suffix {
            FUSED_QKV if self.fused_qkv => Some(vec![
                ("attn_q.weight", 0, q),
                ("attn_k.weight", q, kv),
                ("attn_v.weight", q + kv, kv),
            ]),
            "ffn_up.weight" if self.fused_gate_up => {
                Some(vec![("ffn_gate.weight", 0, ff), ("ffn_up.weight", ff, ff)])
            }
            _ => None,
        }
    }

    /// The per-layer matrices as the file stores them (phi3: `attn_qkv` and a double
    /// `ffn_up` in place of Q/K/V and gate/up), with their ggml dims.
    pub fn stored_layer_matrices(&self) -> Vec<(&'static str, Vec<u64>)> {
        let (e, ff) = (u64::from(self.n_embd), u64::from(self.n_ff));
        let q = u64::from(self.n_head) * u64::from(self.head_dim);
        let kv = u64::from(self.n_head_kv) * u64::from(self.head_dim);
        let mut out = Vec::new();
        if self.fused_qkv {
            out.push((FUSED_QKV, vec![e, q + 2 * kv]));
        } else {
            out.extend([
                ("attn_q.weight", vec![e, q]),
                ("attn_k.weight", vec![e, kv]),
                ("attn_v.weight", vec![e, kv]),
            ]);
        }
        out.push(("attn_output.weight", vec![q, e]));
        if self.fused_gate_up {
            out.push(("ffn_up.weight", vec![e, 2 * ff]));
        } else {
            out.extend([
                ("ffn_gate.weight", vec![e, ff]),
                ("ffn_up.weight", vec![e, ff]),
            ]);
        }
        out.push(("ffn_down.weight", vec![ff, e]));
        out
    }

    /// Every tensor the model needs with its expected ggml dims, in load order.
    pub fn expected_tensors(&self) -> Vec<(String, Vec<u64>)> {
        let mut out = Vec::new();
        let _ = self.each_expected(|name, dims| {
            out.push((name, dims));
            Ok(())
        });
        out
    }

    /// Calls `f` for each expected tensor, stopping at its first error. Lazy on purpose:
    /// validation of a hostile `block_count` of 2^31 stops at the first missing layer instead
    /// of materialising billions of names.
    fn each_expected(
        &self,
        mut f: impl FnMut(String, Vec<u64>) -> Result<(), GgufError>,
    ) -> Result<(), GgufError> {
        let (e, v) = (u64::from(self.n_embd), u64::from(self.vocab_size));
        let q = u64::from(self.n_head) * u64::from(self.head_dim);
        let kv = u64::from(self.n_head_kv) * u64::from(self.head_dim);
        f("token_embd.weight".into(), vec![e, v])?;
        let pairs = vec![u64::from(self.rope_dims / 2)];
        if self.rope_freqs {
            f(ROPE_FREQS.into(), pairs.clone())?;
        }
        if self.long_rope.is_some() {
            f(ROPE_FACTORS_LONG.into(), pairs.clone())?;
            f(ROPE_FACTORS_SHORT.into(), pairs)?;
        }
        let matrices = self.stored_layer_matrices();
        for i in 0..self.n_layers {
            f(layer_tensor(i, "attn_norm.weight"), vec![e])?;
            f(layer_tensor(i, "ffn_norm.weight"), vec![e])?;
            for (s, d) in &matrices {
                f(layer_tensor(i, s), d.clone())?;
            }
            if self.qkv_bias {
                f(layer_tensor(i, "attn_q.bias"), vec![q])?;
                f(layer_tensor(i, "attn_k.bias"), vec![kv])?;
                f(layer_tensor(i, "attn_v.bias"), vec![kv])?;
            }
            if self.attn_output_bias {
                f(layer_tensor(i, "attn_output.bias"), vec![e])?;
            }
            if self.qk_norm {
                let d = u64::from(self.head_dim);
                f(layer_tensor(i, "attn_q_norm.weight"), vec![d])?;
                f(layer_tensor(i, "attn_k_norm.weight"), vec![d])?;
            }
            if self.post_norms {
                f(layer_tensor(i, "post_attention_norm.weight"), vec![e])?;
                f(layer_tensor(i, "post_ffw_norm.weight"), vec![e])?;
            }
        }
        f("output_norm.weight".into(), vec![e])?;
        if !self.tied_output {
            f("output.weight".into(), vec![e, v])?;
        }
        Ok(())
    }

    /// Checks presence, shape and dequantizability of every expected tensor.
    fn validate_tensors(&self, g: &Gguf) -> Result<(), GgufError> {
        self.each_expected(|name, expected| {
            let t = g
                .tensor(&name)
                .ok_or_else(|| GgufError::MissingTensor { name: name.clone() })?;
            if t.dims != expected {
                return Err(GgufError::TensorShape {
                    name,
                    expected,
                    found: t.dims.clone(),
                });
            }
            t.ggml_type().map(|_| ())
        })
    }
}

fn read_rope_scaling(g: &Gguf, arch: &str) -> Result<Option<RopeScaling>, GgufError> {
    let md = g.metadata();
    let k = |s: &str| format!("{arch}.{s}");
    let factor = match md.opt(&k("rope.scaling.factor"), |m, key| m.get_f32(key))? {
        Some(f) => Some(f),
        None => md.opt(&k("rope.scale_linear"), |m, key| m.get_f32(key))?,
    };
    let kind = md.opt(&k("rope.scaling.type"), |m, key| {
        m.get_str(key).map(str::to_string)
    })?;
    let original_context_length = md
        .opt(&k("rope.scaling.original_context_length"), |m, key| {
            m.get_u32(key)
        })?;
    if kind.as_deref() == Some("none") {
        return Ok(None);
    }
    match factor {
        // llama.cpp treats 0 as "unset"; 1 is the identity.
        None | Some(0.0) | Some(1.0) if kind.is_none() => Ok(None),
        f => {
            let factor = f.unwrap_or(1.0);
            positive_f32(&k("rope.scaling.factor"), factor)?;
            Ok(Some(RopeScaling {
                kind: kind.unwrap_or_else(|| "linear".into()),
                factor,
                original_context_length,
            }))
        }
    }
}
