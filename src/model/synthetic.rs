//! A tiny GGUF with random weights, written in memory: what tests (native, browser, example
//! site) load when they need a real model file without downloading one. Llama by default; the
//! qwen2, qwen3 and gemma3 variants add their tensors (biases, Q/K norms, post norms) and keys
//! (gemma3: a sliding window of [`SYNTHETIC_WINDOW`] positions, so short prompts cross it).
//!
//! The vocabulary is GPT-2 byte-level: one token per byte (in GPT-2's byte→unicode spelling),
//! then `<|im_start|>` and `<|im_end|>` (control; the latter is EOS), and a ChatML template, so the
//! whole text path (tokenize, template, generate, stream-decode) runs on it.

use crate::gguf::{
    quantize_q4_0, quantize_q4_1, quantize_q8_0, GgmlType, GgufWriter, MetadataArray, MetadataValue,
};
use crate::tokenizer::byte_level_alphabet;

/// Shape and formats of a synthetic model.
#[derive(Debug, Clone)]
pub struct SyntheticSpec {
    /// `general.architecture`: "llama", "qwen2", "qwen3" or "gemma3".
    pub arch: &'static str,
    pub n_layers: u32,
    pub n_embd: u64,
    pub n_ff: u64,
    pub n_head: u64,
    pub n_head_kv: u64,
    pub context_length: u32,
    /// Format of the attention/FFN matrices, layer `i` using `matrix_types[i % len]`.
    pub matrix_types: Vec<GgmlType>,
    /// Format of the token embedding (also the output head when `tied`).
    pub embedding_type: GgmlType,
    pub tied: bool,
    pub seed: u64,
    /// `{arch}.rope.scaling.type` "linear" with this factor (as Gemma 3 4B+ declare).
    pub rope_scaling_linear: Option<f32>,
}

impl Default for SyntheticSpec {
    fn default() -> Self {
        Self {
            arch: "llama",
            n_layers: 3,
            n_embd: 128,
            n_ff: 352,
            n_head: 4,
            n_head_kv: 2,
            context_length: 512,
            matrix_types: vec![GgmlType::Q4_1, GgmlType::Q8_0, GgmlType::Q4_0],
            embedding_type: GgmlType::Q8_0,
            tied: true,
            seed: 7,
            rope_scaling_linear: None,
        }
    }
}

/// The sliding window of synthetic gemma3 models (local layers see the last 8 positions).
pub const SYNTHETIC_WINDOW: u32 = 8;

/// Vocabulary size of every synthetic model: 256 bytes + 2 control tokens.
pub const SYNTHETIC_VOCAB: u64 = 258;

struct Rng(u64);

impl Rng {
    /// Uniform in [-scale, scale), xorshift64.
    fn values(&mut self, n: u64, scale: f32) -> Vec<f32> {
        (0..n)
            .map(|_| {
                self.0 ^= self.0 << 13;
                self.0 ^= self.0 >> 7;
                self.0 ^= self.0 << 17;
                ((self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0) * scale
            })
            .collect()
    }
}

fn encode(ty: GgmlType, values: &[f32]) -> Vec<u8> {
    match ty {
        GgmlType::Q8_0 => quantize_q8_0(values),
        GgmlType::Q4_0 => quantize_q4_0(values),
        GgmlType::Q4_1 => quantize_q4_1(values),
        GgmlType::Q5_0 => crate::gguf::quantize_q5_0(values),
        GgmlType::Q5_1 => crate::gguf::quantize_q5_1(values),
        GgmlType::Q2_K => crate::gguf::quantize_q2_k(values),
        GgmlType::Q3_K => crate::gguf::quantize_q3_k(values),
        GgmlType::Q4_K => crate::gguf::quantize_q4_k(values),
        GgmlType::Q5_K => crate::gguf::quantize_q5_k(values),
        GgmlType::Q6_K => crate::gguf::quantize_q6_k(values),
        GgmlType::BF16 => crate::gguf::quantize_bf16(values),
        GgmlType::F16 => values
            .iter()
            .flat_map(|v| crate::gguf::f32_to_f16(*v).to_le_bytes())
            .collect(),
        GgmlType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// The GGUF bytes of a synthetic model.
pub fn synthetic_llama(spec: &SyntheticSpec) -> Vec<u8> {
    let mut rng = Rng(spec.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let (e, f, v) = (spec.n_embd, spec.n_ff, SYNTHETIC_VOCAB);
    let head_dim = e / spec.n_head;
    let kv = spec.n_head_kv * head_dim;
    let mut w = GgufWriter::new();
    let arch = spec.arch;
    let key = |s: &str| format!("{arch}.{s}");
    w.add_str("general.architecture", arch);
    w.add_str("general.name", &format!("fuselm synthetic {arch}"));
    w.add_u32(&key("block_count"), spec.n_layers);
    w.add_u32(&key("context_length"), spec.context_length);
    w.add_u32(&key("embedding_length"), e as u32);
    w.add_u32(&key("feed_forward_length"), f as u32);
    w.add_u32(&key("attention.head_count"), spec.n_head as u32);
    w.add_u32(&key("attention.head_count_kv"), spec.n_head_kv as u32);
    w.add_u32(&key("rope.dimension_count"), head_dim as u32);
    // gemma3's global layers rotate with a base of their own (its local ones with 10000).
    let freq_base = if arch == "gemma3" {
        1_000_000.0
    } else {
        10_000.0
    };
    w.add_f32(&key("rope.freq_base"), freq_base);
    w.add_f32(&key("attention.layer_norm_rms_epsilon"), 1e-5);
    if let Some(factor) = spec.rope_scaling_linear {
        w.add_str(&key("rope.scaling.type"), "linear");
        w.add_f32(&key("rope.scaling.factor"), factor);
    }
    if arch == "gemma3" {
        w.add_u32(&key("attention.key_length"), head_dim as u32);
        w.add_u32(&key("attention.sliding_window"), SYNTHETIC_WINDOW);
    }
    let mut tokens = byte_level_alphabet();
    tokens.push("<|im_start|>".into());
    tokens.push("<|im_end|>".into());
    let mut types = vec![1i32; 256];
    types.extend([3, 3]);
    w.add_str("tokenizer.ggml.model", "gpt2");
    w.add_str("tokenizer.ggml.pre", "smollm");
    w.add(
        "tokenizer.ggml.tokens",
        MetadataValue::Array(MetadataArray::String(tokens)),
    );
    w.add(
        "tokenizer.ggml.token_type",
        MetadataValue::Array(MetadataArray::I32(types)),
    );
    w.add(
        "tokenizer.ggml.merges",
        MetadataValue::Array(MetadataArray::String(Vec::new())),
    );
    w.add_u32("tokenizer.ggml.bos_token_id", 256);
    w.add_u32("tokenizer.ggml.eos_token_id", 257);
    w.add_str(
        "tokenizer.chat_template",
        "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}",
    );
    // Weights scaled so activations stay O(1) through the layers (std ≈ 1/sqrt(fan_in)).
    let scale = |fan_in: u64| (3.0 / fan_in as f32).sqrt();
    let matrix = |rng: &mut Rng, w: &mut GgufWriter, name: &str, ty: GgmlType, k: u64, n: u64| {
        let values = rng.values(k * n, scale(k));
        w.add_tensor(name, &[k, n], ty, encode(ty, &values));
    };
    matrix(
        &mut rng,
        &mut w,
        "token_embd.weight",
        spec.embedding_type,
        e,
        v,
    );
    for i in 0..spec.n_layers {
        let ty = spec.matrix_types[i as usize % spec.matrix_types.len().max(1)];
        let name = |s: &str| format!("blk.{i}.{s}");
        w.add_tensor_f32(&name("attn_norm.weight"), &[e], &vec![1.0; e as usize]);
        matrix(&mut rng, &mut w, &name("attn_q.weight"), ty, e, e);
        matrix(&mut rng, &mut w, &name("attn_k.weight"), ty, e, kv);
        matrix(&mut rng, &mut w, &name("attn_v.weight"), ty, e, kv);
        matrix(&mut rng, &mut w, &name("attn_output.weight"), ty, e, e);
        // The architectures' extra vectors, random so that a kernel ignoring one shows.
        let vector =
            |rng: &mut Rng, w: &mut GgufWriter, s: &str, n: u64, base: f32, spread: f32| {
                let values: Vec<f32> = rng.values(n, spread).iter().map(|v| base + v).collect();
                w.add_tensor_f32(&name(s), &[n], &values);
            };
        if arch == "qwen2" {
            vector(&mut rng, &mut w, "attn_q.bias", e, 0.0, 0.5);
            vector(&mut rng, &mut w, "attn_k.bias", kv, 0.0, 0.5);
            vector(&mut rng, &mut w, "attn_v.bias", kv, 0.0, 0.5);
        }
        if arch == "qwen3" || arch == "gemma3" {
            vector(&mut rng, &mut w, "attn_q_norm.weight", head_dim, 1.0, 0.5);
            vector(&mut rng, &mut w, "attn_k_norm.weight", head_dim, 1.0, 0.5);
        }
        if arch == "gemma3" {
            vector(&mut rng, &mut w, "post_attention_norm.weight", e, 1.0, 0.5);
            vector(&mut rng, &mut w, "post_ffw_norm.weight", e, 1.0, 0.5);
        }
        w.add_tensor_f32(&name("ffn_norm.weight"), &[e], &vec![1.0; e as usize]);
        matrix(&mut rng, &mut w, &name("ffn_gate.weight"), ty, e, f);
        matrix(&mut rng, &mut w, &name("ffn_up.weight"), ty, e, f);
        matrix(&mut rng, &mut w, &name("ffn_down.weight"), ty, f, e);
    }
    w.add_tensor_f32("output_norm.weight", &[e], &vec![1.0; e as usize]);
    if !spec.tied {
        matrix(&mut rng, &mut w, "output.weight", spec.embedding_type, e, v);
    }
    w.to_bytes()
}
