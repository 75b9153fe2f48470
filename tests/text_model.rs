//! `TextModel` on the synthetic Llama (byte vocabulary, ChatML template), natively and in the
//! browser: prompt encoding with and without the chat template, stop reasons, the streamed text
//! against a plain decode of the ids, and the KV-capacity error leaving the model usable.

mod common;

use fuselm::error::{ErrorKind, FuselmError};
use fuselm::gpu::GpuContext;
use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use fuselm::model::{GenerateOptions, GenerateResult, LoadOptions, StopReason, TextModel};

const N_CTX: u32 = 48;

async fn load() -> TextModel {
    let bytes = synthetic_llama(&SyntheticSpec::default());
    let ctx = GpuContext::new().await.expect("gpu");
    let options = LoadOptions {
        n_ctx: Some(N_CTX),
        max_batch: Some(16),
        kv_f16: None,
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
    let mut streamed = String::new();
    let result = model
        .generate(prompt, options, &mut |piece| {
            streamed.push_str(piece);
            true
        })
        .await
        .expect("generate");
    let max = options.max_tokens.expect("tests pass maxTokens") as usize;
    match result.stop_reason {
        StopReason::Length => assert_eq!(result.tokens.len(), max),
        StopReason::EndOfGeneration => assert!(result.tokens.len() < max),
        StopReason::Aborted => panic!("nothing aborted this generation"),
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
    assert_eq!(
        result.text,
        model.tokenizer().decode_lossy(&result.tokens, false),
        "text = decode(tokens)"
    );
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

    // Prompt + maxTokens beyond nCtx: the typed error with the numbers, and the model still works.
    let too_long = GenerateOptions {
        max_tokens: Some(N_CTX),
        ..Default::default()
    };
    let err = model
        .generate("Hello", &too_long, &mut |_| true)
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
