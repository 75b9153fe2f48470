//! ModelConfig on synthetic llama/qwen2 files and the real model; writer round trips.
//!
//! Native only (the native lane owns this); in the browser, tests/gguf_reader.rs parses the real model's
//! config, and the SDK loads models (tests/sdk).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use fuselm::gguf::{
    dequantize_tensor, layer_tensor, quantize_q4_0, quantize_q4_1, quantize_q8_0, GgmlType, Gguf,
    GgufError, GgufWriter, ModelConfig, RopeStyle, LAYER_TENSORS,
};

/// Deterministic pseudo-random weights (xorshift), uniform in [-1, 1).
fn weights(seed: u64, n: usize) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

struct Spec {
    arch: &'static str,
    layers: u32,
    embd: u64,
    ff: u64,
    heads: u64,
    kv_heads: u64,
    vocab: u64,
    tied: bool,
    skip: Option<&'static str>,
    reshape: Option<(&'static str, Vec<u64>)>,
}

fn llama() -> Spec {
    Spec {
        arch: "llama",
        layers: 2,
        embd: 64,
        ff: 96,
        heads: 4,
        kv_heads: 2,
        vocab: 40,
        tied: true,
        skip: None,
        reshape: None,
    }
}

/// A tiny model with random Q8_0/Q4_0/Q4_1/F32 weights; `tweak` edits metadata.
fn synth(spec: &Spec, tweak: impl FnOnce(&mut GgufWriter)) -> Vec<u8> {
    let a = spec.arch;
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", a);
    w.add_u32(&format!("{a}.block_count"), spec.layers);
    w.add_u32(&format!("{a}.embedding_length"), spec.embd as u32);
    w.add_u32(&format!("{a}.feed_forward_length"), spec.ff as u32);
    w.add_u32(&format!("{a}.attention.head_count"), spec.heads as u32);
    w.add_u32(
        &format!("{a}.attention.head_count_kv"),
        spec.kv_heads as u32,
    );
    w.add_u32(&format!("{a}.context_length"), 256);
    w.add_f32(&format!("{a}.attention.layer_norm_rms_epsilon"), 1e-5);
    w.add_f32(&format!("{a}.rope.freq_base"), 100_000.0);
    let tokens: Vec<String> = (0..spec.vocab).map(|i| format!("t{i}")).collect();
    w.add_str_array(
        "tokenizer.ggml.tokens",
        &tokens.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    tweak(&mut w);
    let (e, hd) = (spec.embd, spec.embd / spec.heads);
    let mut seed = 0;
    let mut add = |w: &mut GgufWriter, name: String, mut dims: Vec<u64>, ty: GgmlType| {
        if spec.skip == Some(name.as_str()) {
            return;
        }
        if let Some((n, d)) = &spec.reshape {
            if *n == name {
                dims = d.clone();
            }
        }
        seed += 1;
        let x = weights(seed, dims.iter().product::<u64>() as usize);
        let data = match ty {
            GgmlType::Q8_0 => quantize_q8_0(&x),
            GgmlType::Q4_0 => quantize_q4_0(&x),
            GgmlType::Q4_1 => quantize_q4_1(&x),
            _ => x.iter().flat_map(|v| v.to_le_bytes()).collect(),
        };
        w.add_tensor(&name, &dims, ty, data);
    };
    add(
        &mut w,
        "token_embd.weight".into(),
        vec![e, spec.vocab],
        GgmlType::F32,
    );
    for i in 0..spec.layers {
        let l = |s: &str| layer_tensor(i, s);
        add(&mut w, l("attn_norm.weight"), vec![e], GgmlType::F32);
        add(
            &mut w,
            l("attn_q.weight"),
            vec![e, spec.heads * hd],
            GgmlType::Q8_0,
        );
        add(
            &mut w,
            l("attn_k.weight"),
            vec![e, spec.kv_heads * hd],
            GgmlType::Q4_0,
        );
        add(
            &mut w,
            l("attn_v.weight"),
            vec![e, spec.kv_heads * hd],
            GgmlType::Q4_1,
        );
        add(
            &mut w,
            l("attn_output.weight"),
            vec![spec.heads * hd, e],
            GgmlType::Q8_0,
        );
        if a == "qwen2" {
            add(
                &mut w,
                l("attn_q.bias"),
                vec![spec.heads * hd],
                GgmlType::F32,
            );
            add(
                &mut w,
                l("attn_k.bias"),
                vec![spec.kv_heads * hd],
                GgmlType::F32,
            );
            add(
                &mut w,
                l("attn_v.bias"),
                vec![spec.kv_heads * hd],
                GgmlType::F32,
            );
        }
        add(&mut w, l("ffn_norm.weight"), vec![e], GgmlType::F32);
        add(
            &mut w,
            l("ffn_gate.weight"),
            vec![e, spec.ff],
            GgmlType::Q4_1,
        );
        add(&mut w, l("ffn_up.weight"), vec![e, spec.ff], GgmlType::Q4_0);
        add(
            &mut w,
            l("ffn_down.weight"),
            vec![spec.ff, e],
            GgmlType::Q8_0,
        );
    }
    add(&mut w, "output_norm.weight".into(), vec![e], GgmlType::F32);
    if !spec.tied {
        add(
            &mut w,
            "output.weight".into(),
            vec![e, spec.vocab],
            GgmlType::Q8_0,
        );
    }
    w.to_bytes()
}

fn config(file: &[u8]) -> Result<ModelConfig, GgufError> {
    ModelConfig::from_gguf(&Gguf::parse(file)?)
}

fn check_synthetic_llama_config() {
    let c = config(&synth(&llama(), |_| {})).unwrap();
    assert_eq!(
        (
            c.arch.as_str(),
            c.n_layers,
            c.n_embd,
            c.n_ff,
            c.n_head,
            c.n_head_kv,
            c.head_dim
        ),
        ("llama", 2, 64, 96, 4, 2, 16)
    );
    assert_eq!(
        (
            c.rope_freq_base,
            c.rope_dims,
            c.rope_style,
            c.rope_scaling.clone()
        ),
        (100_000.0, 16, RopeStyle::Norm, None)
    );
    assert_eq!((c.rms_eps, c.context_length, c.vocab_size), (1e-5, 256, 40));
    assert!(c.tied_output && !c.qkv_bias && !c.attn_output_bias && !c.rope_freqs);
    let names: Vec<String> = c.expected_tensors().into_iter().map(|(n, _)| n).collect();
    assert_eq!(names.len(), 1 + 2 * LAYER_TENSORS.len() + 1);
    assert_eq!(names[1], "blk.0.attn_norm.weight");
}
cross_test!(synthetic_llama_config, check_synthetic_llama_config);

fn check_synthetic_qwen2_untied_with_scaling() {
    let spec = Spec {
        arch: "qwen2",
        tied: false,
        ..llama()
    };
    let file = synth(&spec, |w| {
        w.add_str("qwen2.rope.scaling.type", "yarn");
        w.add_f32("qwen2.rope.scaling.factor", 4.0);
        w.add_u32("qwen2.rope.scaling.original_context_length", 64);
    });
    let c = config(&file).unwrap();
    assert_eq!(
        (c.rope_style, c.qkv_bias, c.tied_output),
        (RopeStyle::NeoX, true, false)
    );
    let s = c.rope_scaling.unwrap();
    assert_eq!(
        (s.kind.as_str(), s.factor, s.original_context_length),
        ("yarn", 4.0, Some(64))
    );
}
cross_test!(
    synthetic_qwen2_untied_with_scaling,
    check_synthetic_qwen2_untied_with_scaling
);

fn check_config_errors_name_the_problem() {
    let missing = |k: &str| GgufError::MissingKey { key: k.into() };
    // Missing key (written under a different name).
    let f = synth(
        &Spec {
            arch: "llama",
            ..llama()
        },
        |w| {
            w.add_str("general.name", "x");
        },
    );
    assert!(config(&f).is_ok());
    let f = synth(&llama(), |w| {
        w.add_u32("llama.attention.key_length", 0);
    });
    assert!(
        matches!(config(&f), Err(GgufError::InvalidValue { key, .. }) if key == "llama.attention.key_length")
    );
    let f = synth(
        &Spec {
            kv_heads: 3,
            ..llama()
        },
        |_| {},
    );
    assert!(
        matches!(config(&f), Err(GgufError::InvalidValue { key, .. }) if key == "llama.attention.head_count_kv")
    );
    let f = synth(
        &Spec {
            skip: Some("blk.1.ffn_up.weight"),
            ..llama()
        },
        |_| {},
    );
    assert_eq!(
        config(&f),
        Err(GgufError::MissingTensor {
            name: "blk.1.ffn_up.weight".into()
        })
    );
    let f = synth(
        &Spec {
            reshape: Some(("blk.0.attn_q.weight", vec![64, 32])),
            ..llama()
        },
        |_| {},
    );
    assert_eq!(
        config(&f),
        Err(GgufError::TensorShape {
            name: "blk.0.attn_q.weight".into(),
            expected: vec![64, 64],
            found: vec![64, 32]
        })
    );
    let f = synth(
        &Spec {
            arch: "mamba",
            ..llama()
        },
        |_| {},
    );
    let err = config(&f);
    assert_eq!(
        err,
        Err(GgufError::UnsupportedArchitecture {
            arch: "mamba".into()
        })
    );
    let msg = err.unwrap_err().to_string();
    assert!(
        msg.contains("general.architecture") && msg.contains("gemma3"),
        "{msg}"
    );
    let f = synth(
        &Spec {
            reshape: Some(("token_embd.weight", vec![64, 41])),
            ..llama()
        },
        |_| {},
    );
    assert!(matches!(config(&f), Err(GgufError::TensorShape { .. })));
    // A file without the epsilon key: build by hand.
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", "llama");
    for k in [
        "block_count",
        "embedding_length",
        "feed_forward_length",
        "attention.head_count",
        "context_length",
    ] {
        w.add_u32(
            &format!("llama.{k}"),
            if k == "attention.head_count" { 2 } else { 8 },
        );
    }
    assert_eq!(
        config(&w.to_bytes()),
        Err(missing("llama.attention.layer_norm_rms_epsilon"))
    );
    assert_eq!(
        config(&GgufWriter::new().to_bytes()),
        Err(missing("general.architecture"))
    );
}
cross_test!(
    config_errors_name_the_problem,
    check_config_errors_name_the_problem
);

fn check_writer_round_trip_within_quantization_error() {
    let file = synth(
        &Spec {
            tied: false,
            ..llama()
        },
        |_| {},
    );
    let g = Gguf::parse(&file).unwrap();
    let mut seed = 0;
    for t in g.tensors() {
        seed += 1;
        let original = weights(seed, t.n_elements as usize);
        let got = dequantize_tensor(t, g.tensor_data(&file, t).unwrap()).unwrap();
        let ty = t.ggml_type().unwrap();
        for (block, (o, d)) in original.chunks(32).zip(got.chunks(32)).enumerate() {
            let amax = o.iter().fold(0.0f32, |m, v| m.max(v.abs()));
            let range = o.iter().fold(f32::MIN, |m, &v| m.max(v))
                - o.iter().fold(f32::MAX, |m, &v| m.min(v));
            // Half a quantization step (plus f16 rounding of the scale).
            let tol = match ty {
                GgmlType::F32 => 0.0,
                GgmlType::Q8_0 => amax / 127.0 * 0.5 + amax * 1e-3,
                // The value opposite the extreme may clip to 7 steps: up to one full step.
                GgmlType::Q4_0 => amax / 8.0 + amax * 2e-3,
                GgmlType::Q4_1 => range / 15.0 * 0.5 + range * 2e-3,
                _ => unreachable!(),
            };
            for (a, b) in o.iter().zip(d) {
                assert!(
                    (a - b).abs() <= tol,
                    "{} block {block}: {a} vs {b} (tol {tol})",
                    t.name
                );
            }
        }
    }
}
cross_test!(
    writer_round_trip_within_quantization_error,
    check_writer_round_trip_within_quantization_error
);

async fn check_real_smollm2_config() {
    let file = common::default_model_bytes().await;
    let g = Gguf::parse(&file).unwrap();
    let c = ModelConfig::from_gguf(&g).unwrap();
    assert_eq!(
        (
            c.arch.as_str(),
            c.n_layers,
            c.n_embd,
            c.n_ff,
            c.n_head,
            c.n_head_kv,
            c.head_dim
        ),
        ("llama", 30, 576, 1536, 9, 3, 64)
    );
    assert_eq!(
        (c.rope_freq_base, c.rope_dims, c.rope_style),
        (100_000.0, 64, RopeStyle::Norm)
    );
    assert_eq!(
        (c.rms_eps, c.context_length, c.vocab_size),
        (1e-5, 8192, 49152)
    );
    assert!(c.tied_output && !c.qkv_bias);
}
cross_test!(async real_smollm2_config, check_real_smollm2_config);

/// Phi-3's LongRoPE as llama.cpp's converter writes it (the original context length without a
/// scaling type or factor): the long factors for a KV cache beyond the original length, the
/// short ones within it, and the attention factor; Llama 3's factors whatever the size.
fn check_rope_factors_follow_the_context() {
    use fuselm::gguf::{ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT, ROPE_FREQS};
    use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
    let phi3 = SyntheticSpec {
        arch: "phi3",
        long_rope: Some(32),
        ..SyntheticSpec::default()
    };
    let c = config(&synthetic_llama(&phi3)).unwrap();
    assert!(c.rope_scaling.is_none(), "{:?}", c.rope_scaling);
    assert_eq!(c.long_rope, Some(32));
    assert_eq!(c.rope_attn_factor, 1.19);
    assert_eq!(c.rope_factors_tensor(64), Some(ROPE_FACTORS_LONG));
    assert_eq!(c.rope_factors_tensor(32), Some(ROPE_FACTORS_SHORT));
    assert!(c.rope_extended());
    let llama3 = SyntheticSpec {
        rope_freqs: true,
        ..SyntheticSpec::default()
    };
    let c = config(&synthetic_llama(&llama3)).unwrap();
    assert_eq!(c.rope_factors_tensor(64), Some(ROPE_FREQS));
    assert_eq!(c.rope_freq_scale(), Some(1.0));
    let plain = config(&synthetic_llama(&SyntheticSpec::default())).unwrap();
    assert_eq!(plain.rope_factors_tensor(64), None);
    assert!(!plain.rope_extended());
}
cross_test!(
    rope_factors_follow_the_context,
    check_rope_factors_follow_the_context
);
