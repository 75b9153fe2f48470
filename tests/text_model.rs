//! `TextModel` on the synthetic Llama (byte vocabulary, ChatML template): prompt encoding with
//! and without the chat template, stop reasons, the streamed text against a plain decode of the
//! ids, the KV-capacity error leaving the model usable, stop
//! sequences, conversations with KV-prefix reuse, and the streaming loader.
//!
//! Native only (the native lane owns this); in the browser, the SDK runs TextModel through the
//! wasm boundary (tests/sdk: every model source and the streaming loader, stop
//! sequences, chat with KV reuse, limits refused from the header, typed errors).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use fuselm::chat_template::ChatMessage;
use fuselm::constraint::ResponseFormat;
use fuselm::error::{ErrorKind, FuselmError};
use fuselm::gpu::GpuContext;
use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use fuselm::model::{
    GenerateOptions, GenerateResult, LoadOptions, ModelLoader, Prompt, StopReason, Strategy,
    TextModel,
};

const N_CTX: u32 = 48;

async fn load() -> TextModel {
    load_with(N_CTX).await
}

async fn load_with(n_ctx: u32) -> TextModel {
    let bytes = synthetic_llama(&SyntheticSpec::default());
    let ctx = GpuContext::new().await.expect("gpu");
    let options = LoadOptions {
        n_ctx: Some(n_ctx),
        max_batch: Some(16),
        kv_f16: None,
        strategy: None,
    };
    TextModel::load(ctx, &bytes, &options)
        .await
        .expect("load synthetic model")
}

/// Generates, collecting the streamed pieces, and checks what holds for every result.
async fn generate(
    model: &mut TextModel,
    prompt: &str,
    options: &GenerateOptions,
) -> GenerateResult {
    generate_from(model, Prompt::Text(prompt), options).await
}

async fn generate_from(
    model: &mut TextModel,
    prompt: Prompt<'_>,
    options: &GenerateOptions,
) -> GenerateResult {
    let mut streamed = String::new();
    let mut ids = Vec::new();
    let result = model
        .generate(prompt, options, &mut |piece, id| {
            streamed.push_str(piece);
            ids.extend(id);
            true
        })
        .await
        .expect("generate");
    assert_eq!(ids, result.tokens, "every generated id is reported once");
    let max = options.max_tokens.expect("tests pass maxTokens") as usize;
    match result.stop_reason {
        StopReason::Length => assert_eq!(result.tokens.len(), max),
        StopReason::EndOfGeneration => assert!(result.tokens.len() < max),
        StopReason::Aborted => panic!("nothing aborted this generation"),
        StopReason::StopSequence => {}
    }
    assert!(
        result
            .tokens
            .iter()
            .all(|&id| !model.tokenizer().is_eog(id)),
        "EOG ids are not output"
    );
    assert_eq!(
        result.text, streamed,
        "the result text is what was streamed"
    );
    let decoded = model.tokenizer().decode_lossy(&result.tokens, false);
    if result.stop_reason == StopReason::StopSequence {
        let stops = options.stop.as_deref().unwrap_or_default();
        let rest = decoded
            .strip_prefix(&result.text)
            .expect("text is a prefix of decode(tokens)");
        assert!(
            stops.iter().any(|s| rest.starts_with(s.as_str())),
            "a stop sequence follows the text: {rest:?}"
        );
        assert!(stops.iter().all(|s| !result.text.contains(s.as_str())));
    } else {
        assert_eq!(result.text, decoded, "text = decode(tokens)");
    }
    result
}

async fn text_model_on_synthetic_llama() {
    let mut model = load().await;
    assert_eq!(model.gpu().n_ctx(), N_CTX);

    // Plain: the prompt is tokenized as is (one token per byte).
    let plain = GenerateOptions {
        max_tokens: Some(12),
        ..Default::default()
    };
    let result = generate(&mut model, "Hello", &plain).await;
    assert_eq!(
        result.prompt_tokens,
        model.tokenizer().encode("Hello", true, true)
    );
    assert_eq!(result.prompt_tokens, [72, 101, 108, 108, 111]);
    // Greedy generation is deterministic.
    let again = generate(&mut model, "Hello", &plain).await;
    assert_eq!(again.tokens, result.tokens);

    // Chat: the ChatML rendering of a user message (and of a system message before it).
    let chat = GenerateOptions {
        max_tokens: Some(8),
        chat: Some(true),
        ..Default::default()
    };
    let result = generate(&mut model, "Hi", &chat).await;
    let rendered = "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n";
    assert_eq!(
        result.prompt_tokens,
        model.tokenizer().encode(rendered, true, true)
    );
    assert_eq!(
        result.prompt_tokens[0], 256,
        "<|im_start|> is one control token"
    );
    let system = GenerateOptions {
        system: Some("Be brief.".into()),
        ..chat.clone()
    };
    let result = generate(&mut model, "Hi", &system).await;
    let rendered = format!("<|im_start|>system\nBe brief.<|im_end|>\n{rendered}");
    assert_eq!(
        result.prompt_tokens,
        model.tokenizer().encode(&rendered, true, true)
    );

    // Prompt + maxTokens beyond nCtx without a context shift: the typed error with the
    // numbers, and the model still works.
    let too_long = GenerateOptions {
        max_tokens: Some(N_CTX),
        context_shift: Some(false),
        ..Default::default()
    };
    let err = model
        .generate(Prompt::Text("Hello"), &too_long, &mut |_, _| true)
        .await
        .expect_err("prompt + maxTokens > nCtx must fail");
    assert_eq!(err.kind(), ErrorKind::LimitExceeded);
    match err {
        FuselmError::LimitExceeded {
            needed, available, ..
        } => {
            assert_eq!(
                (needed, available),
                (5 + u64::from(N_CTX), u64::from(N_CTX))
            );
        }
        other => panic!("expected LimitExceeded, got {other}"),
    }
    let after = generate(&mut model, "Hello", &plain).await;
    assert_eq!(
        after.tokens, again.tokens,
        "same ids after the rejected generation"
    );

    // With the context shift (the default) a chat goes on past nCtx and keeps its system
    // message: the cache still starts with the template's rendering of it.
    let shifting = GenerateOptions {
        // 80: this model ends its answer at 89.
        max_tokens: Some(80),
        chat: Some(true),
        system: Some("Be brief.".into()),
        ..Default::default()
    };
    let r = generate(&mut model, "Hello", &shifting).await;
    assert_eq!((r.tokens.len(), r.stop_reason), (80, StopReason::Length));
    assert!(r.dropped_tokens > N_CTX / 2, "{}", r.dropped_tokens);
    let system = model
        .tokenizer()
        .encode("<|im_start|>system\nBe brief.<|im_end|>\n", true, true);
    let cached = model.gpu().cached_tokens().to_vec();
    assert_eq!(cached[..system.len()], system[..]);
    assert_eq!(
        cached[system.len()..],
        r.tokens[r.tokens.len() - (cached.len() - system.len()) - 1..r.tokens.len() - 1]
    );

    // A constraint holds across the shifts: 80 letters or spaces, and no end before them.
    for strategy in [Strategy::Unfused, Strategy::Fused] {
        let constrained = GenerateOptions {
            max_tokens: Some(80),
            strategy: Some(strategy),
            response_format: Some(ResponseFormat::Regex {
                pattern: "[a-z ]{80}".into(),
            }),
            ..Default::default()
        };
        let r = generate(&mut model, "Hello", &constrained).await;
        assert_eq!(r.tokens.len(), 80, "{strategy:?}");
        assert!(r.dropped_tokens > 0, "{strategy:?}");
        assert!(
            r.text.len() == 80 && r.text.bytes().all(|b| b == b' ' || b.is_ascii_lowercase()),
            "{strategy:?}: {:?}",
            r.text
        );
    }

    // A prompt that exactly fills the cache with maxTokens still fits.
    let exact = GenerateOptions {
        max_tokens: Some(N_CTX - 5),
        ..Default::default()
    };
    generate(&mut model, "Hello", &exact).await;
}
gpu_test!(
    text_model_generates_on_synthetic_llama,
    text_model_on_synthetic_llama
);

/// Stop sequences end the generation and are never part of the text, even when they span
/// several tokens (the synthetic vocabulary has one token per byte, so every stop of two or more
/// characters spans tokens).
async fn stop_sequences_on_synthetic_llama() {
    let mut model = load().await;
    let plain = GenerateOptions {
        max_tokens: Some(24),
        ..Default::default()
    };
    let free = generate(&mut model, "Hello", &plain).await;
    let text = free.text.clone();
    // A stop taken from the middle of the free-running text: 3 characters at a char boundary.
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    assert!(
        chars.len() >= 8,
        "the synthetic model writes text: {text:?}"
    );
    let (from, _) = chars[4];
    let to = chars.get(7).map_or(text.len(), |&(i, _)| i);
    let stop = text[from..to].to_string();
    let first = text.find(&stop).expect("stop occurs");
    let stopped = generate(
        &mut model,
        "Hello",
        &GenerateOptions {
            stop: Some(vec!["never appears \u{1}".into(), stop.clone()]),
            ..plain.clone()
        },
    )
    .await;
    assert_eq!(stopped.stop_reason, StopReason::StopSequence);
    assert_eq!(stopped.text, text[..first], "the text up to the stop");
    assert!(stopped.tokens.len() < free.tokens.len());
    assert_eq!(stopped.tokens[..], free.tokens[..stopped.tokens.len()]);
    // A stop that never occurs changes nothing.
    let unchanged = generate(
        &mut model,
        "Hello",
        &GenerateOptions {
            stop: Some(vec!["\u{2}\u{3}".into()]),
            ..plain.clone()
        },
    )
    .await;
    assert_eq!((unchanged.text, unchanged.tokens), (free.text, free.tokens));
}
gpu_test!(
    stop_sequences_end_generation_unseen,
    stop_sequences_on_synthetic_llama
);

/// A conversation: each turn is rendered with the template, and with `reuse_prefix` only the new
/// part of the prompt is prefilled; the answer is the same as from a fresh context.
async fn conversation_reuses_the_kv_prefix() {
    let mut model = load_with(160).await;
    let turn = |reuse: bool| GenerateOptions {
        max_tokens: Some(6),
        reuse_prefix: Some(reuse),
        ..Default::default()
    };
    let mut messages = vec![ChatMessage::new("user", "Hi")];
    let first = generate_from(&mut model, Prompt::Messages(&messages), &turn(true)).await;
    assert_eq!(
        first.reused_prompt_tokens, 0,
        "nothing cached before the first turn"
    );
    messages.push(ChatMessage::new("assistant", first.text.as_str()));
    messages.push(ChatMessage::new("user", "Go on"));
    let second = generate_from(&mut model, Prompt::Messages(&messages), &turn(true)).await;
    // The second prompt starts with the first prompt: at least that much is reused.
    assert!(
        second.reused_prompt_tokens as usize >= first.prompt_tokens.len(),
        "reused {} of {} (first prompt {})",
        second.reused_prompt_tokens,
        second.prompt_tokens.len(),
        first.prompt_tokens.len()
    );
    assert!((second.reused_prompt_tokens as usize) < second.prompt_tokens.len());
    let fresh = generate_from(&mut model, Prompt::Messages(&messages), &turn(false)).await;
    assert_eq!(fresh.reused_prompt_tokens, 0);
    assert_eq!(fresh.prompt_tokens, second.prompt_tokens);
    assert_eq!(
        fresh.tokens, second.tokens,
        "reuse gives the fresh context's answer"
    );
    // The same prompt again reuses all of it but the last token (whose logits are needed).
    let again = generate_from(&mut model, Prompt::Messages(&messages), &turn(true)).await;
    assert_eq!(
        again.reused_prompt_tokens as usize,
        again.prompt_tokens.len() - 1
    );
    assert_eq!(again.tokens, fresh.tokens);
    // A different conversation shares only the template's opening.
    let other = [ChatMessage::new("user", "Bye")];
    let other = generate_from(&mut model, Prompt::Messages(&other), &turn(true)).await;
    // "<|im_start|>user\n": 6 tokens.
    assert_eq!(other.reused_prompt_tokens, 6);
    // An empty conversation is a typed error.
    let err = model
        .generate(Prompt::Messages(&[]), &turn(true), &mut |_, _| true)
        .await
        .expect_err("empty conversation");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
}
gpu_test!(
    conversation_reuses_kv_prefix,
    conversation_reuses_the_kv_prefix
);

/// The streaming loader: the file pushed in small pieces loads the same model as the whole file
/// (same ids); a truncated stream, garbage, and a model over the adapter's limits fail with typed
/// errors — the last one as soon as the header is in, before any weight arrives.
async fn streaming_loader_matches_whole_file() {
    let bytes = synthetic_llama(&SyntheticSpec::default());
    let options = LoadOptions {
        n_ctx: Some(N_CTX),
        max_batch: Some(16),
        kv_f16: None,
        strategy: None,
    };
    let plain = GenerateOptions {
        max_tokens: Some(10),
        ..Default::default()
    };
    let mut whole = load().await;
    let expected = generate(&mut whole, "Hello", &plain).await;
    drop(whole);

    let ctx = GpuContext::new().await.expect("gpu");
    let mut loader = ModelLoader::new(ctx, options.clone());
    // With the length vouched for, each tensor's buffer is allocated whole (same result).
    loader.expect_len(bytes.len() as u64);
    for piece in bytes.chunks(997) {
        loader.push(piece).expect("push");
    }
    let status = loader.status().clone();
    assert!(status.header_ready);
    assert_eq!(status.bytes_received, bytes.len() as u64);
    assert_eq!(status.file_bytes, Some(bytes.len() as u64));
    assert_eq!(status.tensors_uploaded, status.tensors_total);
    assert_eq!(
        status.tensors_total,
        3 * 9 + 2,
        "3 layers, embedding, output norm (tied head)"
    );
    let mut streamed = loader.finish().await.expect("streamed load");
    let got = generate(&mut streamed, "Hello", &plain).await;
    assert_eq!(got.tokens, expected.tokens);
    drop(streamed);

    // Truncated: the end of the stream is missing.
    let ctx = GpuContext::new().await.expect("gpu");
    let mut loader = ModelLoader::new(ctx, options.clone());
    loader.push(&bytes[..bytes.len() - 100]).expect("push");
    let err = loader.finish().await.err().expect("truncated");
    assert_eq!(err.kind(), ErrorKind::InvalidModel, "{err}");

    // Not a GGUF at all.
    let ctx = GpuContext::new().await.expect("gpu");
    let mut loader = ModelLoader::new(ctx, options.clone());
    let err = loader
        .push(b"this is not a model file")
        .expect_err("garbage");
    assert_eq!(err.kind(), ErrorKind::InvalidModel, "{err}");
    assert!(loader.push(&bytes).is_err(), "a failed load stays failed");

    // Over the adapter's limits: a KV cache of 2^31 positions. Refused with the header only.
    let ctx = GpuContext::new().await.expect("gpu");
    let huge = LoadOptions {
        n_ctx: Some(1 << 31),
        ..options.clone()
    };
    let mut loader = ModelLoader::new(ctx, huge);
    let header_end = 32 * 1024;
    let err = bytes[..header_end]
        .chunks(4096)
        .find_map(|piece| loader.push(piece).err())
        .expect("refused before the weights");
    assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{err}");
    match err {
        FuselmError::LimitExceeded {
            needed, available, ..
        } => assert!(needed > available),
        other => panic!("{other}"),
    }
}
gpu_test!(
    streaming_loader_loads_pieces,
    streaming_loader_matches_whole_file
);

/// A model with a matrix in a format with no GPU kernel (IQ4_NL) is refused with the typed
/// "unsupported-quant" error as soon as its header is in, before any weight is uploaded.
async fn unsupported_quant_is_refused_at_the_header() {
    let spec = SyntheticSpec {
        n_embd: 256,
        n_ff: 512,
        matrix_types: vec![fuselm::gguf::GgmlType::Q4_0],
        ..SyntheticSpec::default()
    };
    let mut bytes = synthetic_llama(&spec);
    // blk.0.attn_q.weight becomes IQ4_NL (type id 20), whose 18-byte blocks are Q4_0's size:
    // its tensor info is the name, n_dims (u32), 2 dims (u64), then the type id (u32).
    let name = b"blk.0.attn_q.weight";
    let at = bytes
        .windows(name.len())
        .position(|w| w == name)
        .expect("tensor info")
        + name.len()
        + 4
        + 16;
    assert_eq!(bytes[at..at + 4], 2u32.to_le_bytes(), "Q4_0 type id");
    bytes[at..at + 4].copy_from_slice(&20u32.to_le_bytes());
    let ctx = GpuContext::new().await.expect("gpu");
    let mut loader = ModelLoader::new(ctx, LoadOptions::default());
    let err = bytes
        .chunks(4096)
        .find_map(|piece| loader.push(piece).err())
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::UnsupportedQuant, "{err}");
    assert!(err.to_string().contains("IQ4_NL"), "{err}");
    assert_eq!(loader.status().tensors_uploaded, 0);
    assert!(loader.status().bytes_received < bytes.len() as u64 / 2);
    // The whole-file path says the same.
    let ctx = GpuContext::new().await.expect("gpu");
    let err = TextModel::load(ctx, &bytes, &LoadOptions::default())
        .await
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::UnsupportedQuant, "{err}");
}
gpu_test!(
    unsupported_quant_refused,
    unsupported_quant_is_refused_at_the_header
);

/// RoPE scaling other than linear (YaRN) is not implemented on the GPU: such a model is
/// refused with "invalid-model" naming the key, rather than run with wrong rotations. (Linear
/// scaling, Gemma 3 4B+'s, runs: tests/model_synthetic.rs.)
async fn rope_scaling_is_refused() {
    let spec = SyntheticSpec {
        arch: "gemma3",
        rope_scaling_linear: Some(8.0),
        rope_scaling_type: Some("yarn"),
        ..SyntheticSpec::default()
    };
    let bytes = synthetic_llama(&spec);
    let ctx = GpuContext::new().await.expect("gpu");
    let err = TextModel::load(ctx, &bytes, &LoadOptions::default())
        .await
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidModel, "{err}");
    assert!(
        err.to_string().contains("gemma3.rope.scaling.type yarn"),
        "{err}"
    );
}
gpu_test!(rope_scaling_refused, rope_scaling_is_refused);

/// A prompt longer than the context could hold is refused by its bytes before it is tokenized
/// (a raw prompt) or before the chat template renders all of it (issue 37), as
/// "limit-exceeded", and the model still generates.
async fn oversized_prompts_are_refused_before_tokenizing() {
    let mut model = load().await;
    // The synthetic vocabulary's longest token is `<|im_start|>` (12 bytes).
    let limit = model.prompt_byte_limit();
    assert_eq!(limit, N_CTX as usize * 12);
    let long = "a".repeat(100 * limit);
    let err = model
        .encode_prompt(&long, &GenerateOptions::default())
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{err}");
    assert!(err.to_string().contains("prompt bytes"), "{err}");
    let chat = GenerateOptions {
        chat: Some(true),
        ..GenerateOptions::default()
    };
    let err = model.encode_prompt(&long, &chat).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::LimitExceeded, "{err}");
    let short = GenerateOptions {
        max_tokens: Some(4),
        ..GenerateOptions::default()
    };
    let r = generate(&mut model, "ok", &short).await;
    assert!(!r.tokens.is_empty());
    // nCtx 0 names the option instead of becoming 1.
    let bytes = synthetic_llama(&SyntheticSpec::default());
    let ctx = GpuContext::new().await.expect("gpu");
    let zero = LoadOptions {
        n_ctx: Some(0),
        ..LoadOptions::default()
    };
    let err = TextModel::load(ctx, &bytes, &zero)
        .await
        .err()
        .expect("refused");
    assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{err}");
    assert!(
        err.to_string().contains("nCtx must be at least 1, got 0"),
        "{err}"
    );
}
gpu_test!(
    oversized_prompts_refused,
    oversized_prompts_are_refused_before_tokenizing
);
