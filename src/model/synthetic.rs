//! A GGUF with random weights, written in memory: what tests (native, browser, example
//! site) load when they need a real model file without downloading one, and, at a real
//! model's shape (`fuselm synthetic-model`), what benchmarks measure kernels on. Llama by
//! default; the qwen2, qwen3 and gemma3 variants add their tensors (biases, Q/K norms, post
//! norms) and keys (gemma3: a sliding window of [`SYNTHETIC_WINDOW`] positions, so short prompts
//! cross it); phi3 stores Q/K/V as one `attn_qkv` and gate/up as one `ffn_up`, as Phi-3 does.
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
    /// The scaling type written with `rope_scaling_linear`'s factor ("linear" unless set:
    /// tests of what is refused use "yarn").
    pub rope_scaling_type: Option<&'static str>,
    /// Vocabulary size (at least [`SYNTHETIC_VOCAB`]; the tokens past it are never produced
    /// by the tokenizer, they only give the embedding and head a real model's size).
    pub n_vocab: u64,
    /// Head width when it is not n_embd / n_head (Gemma 3: 256).
    pub head_dim: Option<u64>,
    /// The sliding window of gemma3 models (default [`SYNTHETIC_WINDOW`]).
    pub window: Option<u32>,
    /// Writes `rope_freqs.weight` (Llama 3's RoPE frequency factors: 1 for the fastest pairs
    /// up to 8 for the slowest, as Llama 3.1's rule gives).
    pub rope_freqs: bool,
    /// Writes Phi-3's LongRoPE factors (`rope_factors_long/short.weight`) with this original
    /// context length, and `rope.scaling.attn_factor` 1.19.
    pub long_rope: Option<u32>,
    /// Per-role formats as llama.cpp's Q4_K_M mix picks them (overrides `matrix_types`,
    /// `embedding_type`; see [`q4_k_m_type`]).
    pub q4_k_m: bool,
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
            rope_scaling_type: None,
            n_vocab: SYNTHETIC_VOCAB,
            head_dim: None,
            window: None,
            q4_k_m: false,
            rope_freqs: false,
            long_rope: None,
        }
    }
}

/// The shapes [`shape_preset`] knows, with the released model each copies.
pub const SHAPES: [(&str, &str); 7] = [
    (
        "phi3-mini",
        "Phi-3-mini (3.8B): phi3, 32 layers, 3072 wide, 32 heads",
    ),
    (
        "llama-3.2-1b",
        "Llama-3.2-1B: llama, 16 layers, 2048 wide, GQA 32:8",
    ),
    (
        "llama-3.2-3b",
        "Llama-3.2-3B: llama, 28 layers, 3072 wide, GQA 24:8",
    ),
    (
        "qwen2.5-1.5b",
        "Qwen2.5-1.5B: qwen2, 28 layers, 1536 wide, GQA 12:2",
    ),
    (
        "gemma3-1b",
        "Gemma 3 1B: gemma3, 26 layers, 1152 wide, 4 heads of 256, GQA 4:1",
    ),
    (
        "qwen2.5-0.5b",
        "Qwen2.5-0.5B: qwen2, 24 layers, 896 wide, GQA 14:2",
    ),
    (
        "smollm2-135m",
        "SmolLM2-135M: llama, 30 layers, 576 wide, GQA 9:3",
    ),
];

/// A released model's exact shape (dims, heads, layers, vocabulary size, tied head, window)
/// with random weights, in `matrix_type` (all matrices and the embedding) or, for `None`,
/// llama.cpp's Q4_K_M mix. What differs from the real model: the weights, the tokenizer (the
/// synthetic byte-level one padded to the vocabulary size) and RoPE scaling (Llama 3.2's
/// frequency factors are not written). `None` for an unknown name (see [`SHAPES`]).
pub fn shape_preset(name: &str, matrix_type: Option<GgmlType>) -> Option<SyntheticSpec> {
    let base = |arch, n_layers, n_embd, n_ff, n_head, n_head_kv, n_vocab, tied| SyntheticSpec {
        arch,
        n_layers,
        n_embd,
        n_ff,
        n_head,
        n_head_kv,
        n_vocab,
        tied,
        context_length: 4096,
        matrix_types: matrix_type.into_iter().collect(),
        embedding_type: matrix_type.unwrap_or(GgmlType::Q4_K),
        q4_k_m: matrix_type.is_none(),
        ..SyntheticSpec::default()
    };
    Some(match name {
        "phi3-mini" => base("phi3", 32, 3072, 8192, 32, 32, 32_064, false),
        "llama-3.2-1b" => base("llama", 16, 2048, 8192, 32, 8, 128_256, true),
        "llama-3.2-3b" => base("llama", 28, 3072, 8192, 24, 8, 128_256, true),
        "qwen2.5-1.5b" => base("qwen2", 28, 1536, 8960, 12, 2, 151_936, true),
        "qwen2.5-0.5b" => base("qwen2", 24, 896, 4864, 14, 2, 151_936, true),
        "gemma3-1b" => SyntheticSpec {
            head_dim: Some(256),
            window: Some(512),
            ..base("gemma3", 26, 1152, 6912, 4, 1, 262_144, true)
        },
        "smollm2-135m" => base("llama", 30, 576, 1536, 9, 3, 49_152, true),
        _ => return None,
    })
}

/// The format llama.cpp's Q4_K_M gives a tensor (`llama_tensor_get_type`): Q6_K for the
/// output head (and a tied embedding, which is the head) and for `attn_v` and `ffn_down` in the first and last eighth of the layers and
/// every third between; Q5_K for a fused `attn_qkv`; Q4_K for the rest. `role` is the tensor's
/// suffix (`attn_v.weight`), `layer` its block.
pub fn q4_k_m_type(role: &str, layer: u32, n_layers: u32) -> GgmlType {
    let more_bits = |i: u32, n: u32| i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
    match role {
        "output.weight" => GgmlType::Q6_K,
        "attn_v.weight" | "ffn_down.weight" if more_bits(layer, n_layers) => GgmlType::Q6_K,
        "attn_qkv.weight" => GgmlType::Q5_K,
        _ => GgmlType::Q4_K,
    }
}

/// llama.cpp's fallback for a K-quant whose rows are not whole 256-value superblocks
/// (`llama_tensor_get_type`: Q4_K → Q5_0, Q5_K → Q5_1, Q6_K → Q8_0, Q2_K/Q3_K → Q4_0).
fn fit_rows(ty: GgmlType, k: u64) -> GgmlType {
    if ty.block_len() != 256 || k % 256 == 0 {
        return ty;
    }
    match ty {
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q5_K => GgmlType::Q5_1,
        GgmlType::Q6_K => GgmlType::Q8_0,
        _ => GgmlType::Q4_0,
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

/// [`encode_rows`] of whole rows of `k` values, on every core for large tensors (a 3.8B
/// model's quantization is minutes on one): blocks never cross rows, so chunks of rows
/// quantize independently and concatenate to the same bytes.
fn encode(ty: GgmlType, values: &[f32], k: u64) -> Vec<u8> {
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let rows = values.len() / k as usize;
    if threads == 1 || values.len() < (1 << 20) || rows < 2 {
        return encode_rows(ty, values);
    }
    let per = rows.div_ceil(threads) * k as usize;
    std::thread::scope(|scope| {
        let parts: Vec<_> = values
            .chunks(per)
            .map(|chunk| scope.spawn(move || encode_rows(ty, chunk)))
            .collect();
        let parts: Vec<Vec<u8>> = parts
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            })
            .collect();
        parts.concat()
    })
}

fn encode_rows(ty: GgmlType, values: &[f32]) -> Vec<u8> {
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
    let (e, f, v) = (spec.n_embd, spec.n_ff, spec.n_vocab.max(SYNTHETIC_VOCAB));
    let head_dim = spec.head_dim.unwrap_or(e / spec.n_head);
    let (q, kv) = (spec.n_head * head_dim, spec.n_head_kv * head_dim);
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
    if spec.head_dim.is_some() {
        w.add_u32(&key("attention.key_length"), head_dim as u32);
        w.add_u32(&key("attention.value_length"), head_dim as u32);
    }
    // gemma3's global layers rotate with a base of their own (its local ones with 10000).
    let freq_base = if arch == "gemma3" {
        1_000_000.0
    } else {
        10_000.0
    };
    w.add_f32(&key("rope.freq_base"), freq_base);
    w.add_f32(&key("attention.layer_norm_rms_epsilon"), 1e-5);
    if let Some(factor) = spec.rope_scaling_linear {
        w.add_str(
            &key("rope.scaling.type"),
            spec.rope_scaling_type.unwrap_or("linear"),
        );
        w.add_f32(&key("rope.scaling.factor"), factor);
    }
    if let Some(original) = spec.long_rope {
        w.add_u32(&key("rope.scaling.original_context_length"), original);
        w.add_f32(&key("rope.scaling.attn_factor"), 1.19);
    }
    if arch == "gemma3" {
        if spec.head_dim.is_none() {
            w.add_u32(&key("attention.key_length"), head_dim as u32);
        }
        w.add_u32(
            &key("attention.sliding_window"),
            spec.window.unwrap_or(SYNTHETIC_WINDOW),
        );
    }
    let alphabet = byte_level_alphabet();
    let mut tokens = alphabet.clone();
    tokens.push("<|im_start|>".into());
    tokens.push("<|im_end|>".into());
    let mut types = vec![1i32; 256];
    types.extend([3, 3]);
    // Phi-3's vocabulary has SentencePiece's specials, and llama.cpp marks them by name when a
    // model's name says Phi-3 (it fails to load one without them): the first filler slots.
    let mut filler = 0;
    if arch == "phi3" && v >= SYNTHETIC_VOCAB + 4 {
        for special in ["<unk>", "<s>", "</s>", "<|endoftext|>"] {
            tokens.push(special.into());
            types.push(3);
        }
        filler = 4;
    }
    // Filler tokens up to n_vocab: distinct strings of 2 (then 3) byte-level characters, which
    // no merge ever produces.
    for j in filler..v - SYNTHETIC_VOCAB {
        let digits: &[u64] = if j < 65_536 {
            &[j % 256, j / 256]
        } else {
            let r = j - 65_536;
            &[r % 256, (r / 256) % 256, r / 65_536 % 256]
        };
        tokens.push(
            digits
                .iter()
                .map(|&d| alphabet[d as usize].as_str())
                .collect(),
        );
        types.push(1);
    }
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
        let ty = fit_rows(ty, k);
        let values = rng.values(k * n, scale(k));
        w.add_tensor(name, &[k, n], ty, encode(ty, &values, k));
    };
    // Phi-3's fused tensors are written as their parts' rows one after another, so a model
    // reads the same whether a loader splits them or not.
    let stacked =
        |rng: &mut Rng, w: &mut GgufWriter, name: &str, ty: GgmlType, k: u64, ns: &[u64]| {
            let ty = fit_rows(ty, k);
            let mut values = Vec::new();
            for &n in ns {
                values.extend(rng.values(k * n, scale(k)));
            }
            w.add_tensor(name, &[k, ns.iter().sum()], ty, encode(ty, &values, k));
        };
    let typed = |role: &str, layer: u32, ty: GgmlType| {
        if spec.q4_k_m {
            q4_k_m_type(role, layer, spec.n_layers)
        } else {
            ty
        }
    };
    // llama.cpp's Q4_K_M: a tied embedding is also the head, so it gets the head's type.
    let embedding_type = match (spec.q4_k_m, spec.tied) {
        (true, true) => q4_k_m_type("output.weight", 0, spec.n_layers),
        (true, false) => GgmlType::Q4_K,
        (false, _) => spec.embedding_type,
    };
    matrix(&mut rng, &mut w, "token_embd.weight", embedding_type, e, v);
    // RoPE factors, one per rotated pair: from 1 (fast pairs) to 8 (slow ones), as Llama 3.1's
    // rule spreads them; LongRoPE's short ones between 1 and 2, its long ones larger.
    let pairs = head_dim / 2;
    let ramp = |lo: f32, hi: f32| -> Vec<f32> {
        (0..pairs)
            .map(|i| lo + (hi - lo) * i as f32 / (pairs.max(2) - 1) as f32)
            .collect()
    };
    if spec.rope_freqs {
        w.add_tensor_f32(crate::gguf::ROPE_FREQS, &[pairs], &ramp(1.0, 8.0));
    }
    if spec.long_rope.is_some() {
        w.add_tensor_f32(crate::gguf::ROPE_FACTORS_LONG, &[pairs], &ramp(1.0, 40.0));
        w.add_tensor_f32(crate::gguf::ROPE_FACTORS_SHORT, &[pairs], &ramp(1.0, 2.0));
    }
    let phi3 = arch == "phi3";
    for i in 0..spec.n_layers {
        let ty = spec
            .matrix_types
            .get(i as usize % spec.matrix_types.len().max(1))
            .copied()
            .unwrap_or(GgmlType::Q4_K);
        let name = |s: &str| format!("blk.{i}.{s}");
        w.add_tensor_f32(&name("attn_norm.weight"), &[e], &vec![1.0; e as usize]);
        if phi3 {
            let t = typed("attn_qkv.weight", i, ty);
            stacked(
                &mut rng,
                &mut w,
                &name("attn_qkv.weight"),
                t,
                e,
                &[q, kv, kv],
            );
        } else {
            for (role, n) in [
                ("attn_q.weight", q),
                ("attn_k.weight", kv),
                ("attn_v.weight", kv),
            ] {
                matrix(&mut rng, &mut w, &name(role), typed(role, i, ty), e, n);
            }
        }
        let t = typed("attn_output.weight", i, ty);
        matrix(&mut rng, &mut w, &name("attn_output.weight"), t, q, e);
        // The architectures' extra vectors, random so that a kernel ignoring one shows.
        let vector =
            |rng: &mut Rng, w: &mut GgufWriter, s: &str, n: u64, base: f32, spread: f32| {
                let values: Vec<f32> = rng.values(n, spread).iter().map(|v| base + v).collect();
                w.add_tensor_f32(&name(s), &[n], &values);
            };
        if arch == "qwen2" {
            vector(&mut rng, &mut w, "attn_q.bias", q, 0.0, 0.5);
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
        if phi3 {
            let t = typed("ffn_up.weight", i, ty);
            stacked(&mut rng, &mut w, &name("ffn_up.weight"), t, e, &[f, f]);
        } else {
            for role in ["ffn_gate.weight", "ffn_up.weight"] {
                matrix(&mut rng, &mut w, &name(role), typed(role, i, ty), e, f);
            }
        }
        let t = typed("ffn_down.weight", i, ty);
        matrix(&mut rng, &mut w, &name("ffn_down.weight"), t, f, e);
    }
    w.add_tensor_f32("output_norm.weight", &[e], &vec![1.0; e as usize]);
    if !spec.tied {
        let t = if spec.q4_k_m {
            q4_k_m_type("output.weight", 0, spec.n_layers)
        } else {
            spec.embedding_type
        };
        matrix(&mut rng, &mut w, "output.weight", t, e, v);
    }
    w.to_bytes()
}
