//! Hostile input ends in a typed error within a bound, and leaves the engine usable.
//!
//! * Non-finite numbers: a model whose logits turn NaN or infinite ends its generation with a
//!   `numerical` error naming the position, on every strategy, greedy and sampled — never a
//!   normal stop (the GPU marks the step, `sampling::NONFINITE_ID`; unfused checks on the host).
//! * Tokenizer: special-token matching is linear in the text whatever the number of special
//!   tokens (an automaton, not a scan per token).
//! * The corpus under `tests/hostile/`: chat templates that loop, recurse, or build strings past
//!   any context, each with the error it must end in and a time bound loose enough for CI.

// The browser runs the template corpus; the GPU cases are native (`native_test!`: the NaN
// marking is one WGSL path on every backend, and the browser lane runs those kernels through
// the SDK and synthetic-model tests).
#![cfg_attr(target_arch = "wasm32", allow(dead_code, unused_imports))]

mod common;

use fuselm::gguf::{GgmlType, Gguf};
use fuselm::gpu::GpuContext;
use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use fuselm::model::{GenerationRequest, GpuModel, LoadOptions, Strategy, TokenGeneration};
use fuselm::sampling::{SamplerParams, SamplingOptions};
use fuselm::FuselmError;

/// The default synthetic llama with an F32 embedding and an untied F32 head, so single rows can
/// be poisoned without touching the others.
fn spec() -> SyntheticSpec {
    SyntheticSpec {
        embedding_type: GgmlType::F32,
        tied: false,
        seed: 21,
        ..SyntheticSpec::default()
    }
}

/// `bytes` with row `row` of the F32 tensor `name` set to `value`.
fn poison_row(bytes: &[u8], name: &str, row: usize, value: f32) -> Vec<u8> {
    let gguf = Gguf::parse(bytes).expect("synthetic GGUF parses");
    let t = gguf.tensor(name).expect("tensor").clone();
    assert_eq!(t.ty, Some(GgmlType::F32), "{name} is F32");
    let width = t.dims[0] as usize;
    let start = t.offset as usize + row * width * 4;
    let mut out = bytes.to_vec();
    for k in 0..width {
        out[start + 4 * k..start + 4 * k + 4].copy_from_slice(&value.to_le_bytes());
    }
    out
}

fn prompt() -> Vec<u32> {
    b"fused kernels, one pass: "
        .iter()
        .map(|&b| u32::from(b))
        .collect()
}

/// The strategies this model runs, with a chunk size each (several steps per submission).
async fn strategies(gpu: &mut GpuModel) -> Vec<(Strategy, u32)> {
    let mut out = vec![
        (Strategy::Unfused, 1),
        (Strategy::Fused, 1),
        (Strategy::Fused, 5),
    ];
    if gpu.prepare_strategy(Strategy::Megakernel).await.is_ok() {
        out.push((Strategy::Megakernel, 5));
    }
    if gpu.prepare_strategy(Strategy::MegakernelGrid).await.is_ok() {
        out.push((Strategy::MegakernelGrid, 5));
    }
    out
}

async fn run(
    gpu: &mut GpuModel,
    strategy: Strategy,
    chunk: u32,
    sampler: SamplerParams,
    max_tokens: u32,
) -> Result<TokenGeneration, FuselmError> {
    let prompt = prompt();
    let request = GenerationRequest {
        prompt: &prompt,
        max_tokens,
        strategy,
        sampler,
        chunk_tokens: chunk,
        reuse_prefix: false,
        constraint: None,
        logprobs: None,
    };
    gpu.generate(&request, &mut |_| true).await
}

fn options() -> LoadOptions {
    LoadOptions {
        n_ctx: Some(64),
        max_batch: Some(8),
        kv_f16: Some(false),
        strategy: None,
    }
}

fn assert_numerical(r: Result<TokenGeneration, FuselmError>, position: u32, what: &str) {
    match r {
        Err(FuselmError::Numerical {
            position: p,
            generated,
        }) => {
            assert_eq!(p, position, "{what}: position");
            assert_eq!(
                generated,
                position - prompt().len() as u32,
                "{what}: generated"
            );
        }
        Err(e) => panic!("{what}: expected a numerical error, got {e}"),
        Ok(g) => panic!(
            "{what}: expected a numerical error, got {} tokens ({:?})",
            g.tokens.len(),
            g.stop_reason
        ),
    }
}

/// A token whose embedding row is NaN: generation runs until the model chooses it, then the
/// next step's logits are NaN and the generation fails there (greedy and sampled, every
/// strategy); the model stays usable. An infinite head row fails the first step.
async fn non_finite_logits_are_a_numerical_error() {
    let healthy = synthetic_llama(&spec());
    let greedy = SamplingOptions::default().resolve(&[]).expect("greedy");
    let sampled = SamplingOptions {
        temperature: Some(0.8),
        top_k: Some(40),
        seed: Some(7),
        ..SamplingOptions::default()
    }
    .resolve(&[])
    .expect("sampled");
    let n = prompt().len() as u32;

    // The healthy model's greedy ids: poison the embedding of the third one that is new.
    let ctx = GpuContext::new().await.expect("gpu");
    let mut gpu = GpuModel::load(ctx, &healthy, &options())
        .await
        .expect("load");
    let want = run(&mut gpu, Strategy::Fused, 5, greedy, 8)
        .await
        .expect("healthy generation");
    drop(gpu);
    let prompt = prompt();
    let k = (0..want.tokens.len())
        .find(|&i| {
            i >= 2
                && !prompt.contains(&want.tokens[i])
                && !want.tokens[..i].contains(&want.tokens[i])
        })
        .expect("a generated token not seen before");
    let poison = want.tokens[k];
    let bytes = poison_row(&healthy, "token_embd.weight", poison as usize, f32::NAN);

    let ctx = GpuContext::new().await.expect("gpu");
    let mut gpu = GpuModel::load(ctx, &bytes, &options()).await.expect("load");
    for (strategy, chunk) in strategies(&mut gpu).await {
        let what = format!("NaN embedding row, {strategy:?}/{chunk}, greedy");
        // Token k is generated (and streamed); the step after it sees NaN.
        assert_numerical(
            run(&mut gpu, strategy, chunk, greedy, 8).await,
            n + k as u32 + 1,
            &what,
        );
        // Still usable: a generation that stops before the poisoned token equals the healthy one.
        let ok = run(&mut gpu, strategy, chunk, greedy, k as u32)
            .await
            .unwrap_or_else(|e| panic!("{what}, after the error: {e}"));
        assert_eq!(ok.tokens, want.tokens[..k], "{what}, after the error");
    }

    // An infinite output row: ±inf or NaN logits at the first step, sampled or not.
    let bytes = poison_row(&healthy, "output.weight", 3, f32::INFINITY);
    let ctx = GpuContext::new().await.expect("gpu");
    let mut gpu = GpuModel::load(ctx, &bytes, &options()).await.expect("load");
    for (strategy, chunk) in strategies(&mut gpu).await {
        for (mode, sampler) in [("greedy", greedy), ("sampled", sampled)] {
            let what = format!("infinite head row, {strategy:?}/{chunk}, {mode}");
            assert_numerical(run(&mut gpu, strategy, chunk, sampler, 8).await, n, &what);
        }
    }
}
native_test!(non_finite_logits, non_finite_logits_are_a_numerical_error);

/// A byte-level vocabulary (256 byte tokens) with `n_special` control tokens `<|c{i}|>`.
fn vocab_with_specials(n_special: usize) -> fuselm::tokenizer::VocabSpec {
    let mut tokens = fuselm::tokenizer::byte_level_alphabet();
    let mut types = vec![1; 256];
    for i in 0..n_special {
        tokens.push(format!("<|c{i}|>"));
        types.push(3);
    }
    fuselm::tokenizer::VocabSpec {
        model: "gpt2".into(),
        pre: Some("smollm".into()),
        tokens,
        token_types: Some(types),
        merges: Some(Vec::new()),
        ..Default::default()
    }
}

/// Special-token matching is one pass over the text: 200,000 control tokens cost about what 10
/// do (the per-token scan it replaced took special tokens × text: 26.9 s for 1 MB with 10⁶).
/// The bound is loose (a debug build on a loaded CI machine); `--release -- --nocapture` prints
/// the figures; the grid by input size and special-token count is in bench/README.md
/// ("Does untrusted input stay bounded?").
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn special_token_matching_is_linear() {
    use std::time::Instant;
    let chunk = "plain text with a <|c7|> token and more words after it; ";
    let text: String = chunk.repeat((1 << 20) / chunk.len());
    let mut seconds = Vec::new();
    for n_special in [10usize, 200_000] {
        let t0 = Instant::now();
        let tok = fuselm::tokenizer::Tokenizer::from_spec(vocab_with_specials(n_special))
            .expect("tokenizer");
        let build = t0.elapsed().as_secs_f64();
        let t0 = Instant::now();
        let ids = tok.encode(&text, false, true);
        let encode = t0.elapsed().as_secs_f64();
        let c7 = 256 + 7;
        let hits = ids.iter().filter(|&&id| id == c7).count();
        assert_eq!(hits, text.len() / chunk.len(), "every <|c7|> matched");
        // With parse_special off the control token is text.
        assert!(!tok.encode(chunk, false, false).contains(&c7));
        eprintln!(
            "{n_special} special tokens: build {build:.3} s, 1 MiB encoded in {encode:.3} s \
             ({:.0} tokens/s)",
            ids.len() as f64 / encode
        );
        seconds.push(encode);
    }
    assert!(
        seconds[1] < 3.0 * seconds[0] + 1.0,
        "200,000 special tokens made tokenizing {:.2}× slower ({seconds:?})",
        seconds[1] / seconds[0]
    );
}

/// Abort during a long prompt: `keep_going` is asked between prefill batches (the megakernel:
/// between dispatches of at most 32 prompt positions), the generation stops there with
/// `aborted` and no token, and the model is usable after it: the same request then gives the
/// tokens it gives on a fresh model.
async fn abort_stops_prefill_between_batches() {
    use std::cell::Cell;
    let bytes = synthetic_llama(&spec());
    let ctx = GpuContext::new().await.expect("gpu");
    let options = LoadOptions {
        n_ctx: Some(256),
        max_batch: Some(16),
        kv_f16: Some(false),
        strategy: None,
    };
    let mut gpu = GpuModel::load(ctx, &bytes, &options).await.expect("load");
    let long: Vec<u32> = (0..200u32).map(|i| 32 + (i * 7) % 90).collect();
    let greedy = SamplingOptions::default().resolve(&[]).expect("greedy");
    let mut strategies = vec![(Strategy::Unfused, 1), (Strategy::Fused, 8)];
    if gpu.prepare_strategy(Strategy::Megakernel).await.is_ok() {
        strategies.push((Strategy::Megakernel, 8));
    }
    for (strategy, chunk) in strategies {
        let request = GenerationRequest {
            prompt: &long,
            max_tokens: 4,
            strategy,
            sampler: greedy,
            chunk_tokens: chunk,
            reuse_prefix: false,
            constraint: None,
            logprobs: None,
        };
        let want = gpu
            .generate(&request, &mut |_| true)
            .await
            .expect("whole generation");
        // Stop at the second question: after the first batch (dispatch) has run.
        let asked = Cell::new(0u32);
        let stop_at_second = || {
            asked.set(asked.get() + 1);
            asked.get() < 2
        };
        let mut streamed = 0;
        let r = gpu
            .generate_until(
                &request,
                &mut |_| {
                    streamed += 1;
                    true
                },
                &stop_at_second,
            )
            .await
            .expect("aborted generation");
        assert_eq!(
            r.stop_reason,
            fuselm::model::StopReason::Aborted,
            "{strategy:?}"
        );
        assert!(
            r.tokens.is_empty() && streamed == 0,
            "{strategy:?}: no token"
        );
        assert_eq!(asked.get(), 2, "{strategy:?}: asked until it said stop");
        let again = gpu
            .generate(&request, &mut |_| true)
            .await
            .expect("after the abort");
        assert_eq!(
            again.tokens, want.tokens,
            "{strategy:?}: usable after the abort"
        );
    }
}
native_test!(abort_during_prefill, abort_stops_prefill_between_batches);

/// Loads reuse compiled kernels: a second load on the device of a first (`GpuContext::sibling`,
/// what the npm package does for every load on a page) compiles no pipeline and generates the
/// same tokens; a model's buffers are its context's, destroyed when it is dropped while the
/// device stays for the other, and repeated generations make no new ones.
async fn second_load_compiles_nothing() {
    let bytes = synthetic_llama(&spec());
    let root = GpuContext::new().await.expect("gpu");
    let options = LoadOptions {
        n_ctx: Some(64),
        max_batch: Some(8),
        kv_f16: Some(false),
        strategy: None,
    };
    let prompt: Vec<u32> = (0..12u32).map(|i| 32 + i * 5).collect();
    let greedy = SamplingOptions::default().resolve(&[]).expect("greedy");
    let run = |strategy| GenerationRequest {
        prompt: &prompt,
        max_tokens: 6,
        strategy,
        sampler: greedy,
        chunk_tokens: 4,
        reuse_prefix: false,
        constraint: None,
        logprobs: None,
    };
    let mut runs = Vec::new();
    for load in 0..2 {
        let ctx = root.sibling(Default::default()).expect("sibling");
        let mut gpu = GpuModel::load(ctx, &bytes, &options).await.expect("load");
        let mut strategies = vec![Strategy::Unfused, Strategy::Fused];
        if gpu.prepare_strategy(Strategy::Megakernel).await.is_ok() {
            strategies.push(Strategy::Megakernel);
        }
        let mut tokens = Vec::new();
        let mut held = Vec::new();
        for round in 0..2 {
            for &strategy in &strategies {
                let r = gpu.generate(&run(strategy), &mut |_| true).await;
                tokens.push(r.expect("generation").tokens);
            }
            held.push(gpu.context().buffers_held());
            assert!(
                round == 0 || held[round] == held[0],
                "buffers per round: {held:?}"
            );
        }
        let compiled = gpu.context().pipelines_compiled();
        if load == 0 {
            assert!(
                compiled > 10,
                "the first load compiles its kernels ({compiled})"
            );
        } else {
            assert_eq!(compiled, 0, "the second load compiles nothing");
        }
        runs.push(tokens);
    }
    assert_eq!(runs[0], runs[1], "the same tokens from both loads");
    assert_eq!(
        root.buffers_held(),
        0,
        "the device's own context holds no buffer"
    );
}
native_test!(loads_reuse_pipelines, second_load_compiles_nothing);

/// The corpus of `tests/hostile/templates/`, compiled in (the browser reads no files).
macro_rules! corpus {
    ($($file:literal),* $(,)?) => {
        &[$(($file, include_str!(concat!("hostile/templates/", $file)))),*]
    };
}
const TEMPLATES: &[(&str, &str)] = corpus!(
    "chatml_ok.jinja",
    "concat_accumulation.jinja",
    "concat_doubling.jinja",
    "deep_nesting.jinja",
    "format_char_boundary.jinja",
    "format_ok.jinja",
    "format_width_overflow.jinja",
    "hidden_builtin.jinja",
    "huge_format.jinja",
    "huge_indent.jinja",
    "huge_join.jinja",
    "huge_join_items.jinja",
    "huge_join_sep_kwarg.jinja",
    "huge_method_format.jinja",
    "huge_method_replace.jinja",
    "huge_output.jinja",
    "huge_range.jinja",
    "huge_repeat.jinja",
    "huge_replace.jinja",
    "huge_replace_list.jinja",
    "huge_tojson.jinja",
    "huge_tojson_items.jinja",
    "infinite_recursion.jinja",
    "kwargs_ok.jinja",
    "list_doubling.jinja",
    "macro_doubling.jinja",
    "nested_loops.jinja",
    "raise.jinja",
    "repeat_in_loop.jinja",
    "syntax_error.jinja",
);

/// Every template of the corpus (listed with the outcome it must have in
/// `tests/hostile/templates.json`) renders or fails with that typed error within its time
/// bound, rendered as the text model renders (output limited; here to 64 KiB). Natively and in
/// the browser, where a failed allocation would kill the tab's wasm instance.
fn hostile_templates_end_in_their_typed_error() {
    use fuselm::chat_template::{ChatMessage, ChatTemplate, TemplateError};
    use fuselm::clock::now_seconds;
    let manifest: serde_json::Value =
        serde_json::from_str(include_str!("hostile/templates.json")).expect("templates.json");
    let cases = manifest["templates"].as_array().expect("templates list");
    let listed: Vec<&str> = cases.iter().filter_map(|c| c["file"].as_str()).collect();
    let mut embedded: Vec<&str> = TEMPLATES.iter().map(|(f, _)| *f).collect();
    embedded.sort_unstable();
    let mut sorted = listed.clone();
    sorted.sort_unstable();
    assert_eq!(
        sorted, embedded,
        "templates.json lists the compiled-in corpus"
    );
    let messages = [
        ChatMessage::new("system", "Be brief."),
        ChatMessage::new("user", "Hello there"),
    ];
    let mut wrong = Vec::new();
    for case in cases {
        let file = case["file"].as_str().unwrap_or_default();
        let expect = case["expect"].as_str().unwrap_or_default();
        let bound = case["seconds"].as_f64().unwrap_or(5.0);
        let source = TEMPLATES
            .iter()
            .find(|(f, _)| *f == file)
            .map(|(_, s)| *s)
            .unwrap_or_default();
        let t0 = now_seconds();
        let outcome = ChatTemplate::new(source, "<s>", "</s>")
            .and_then(|t| t.render_limited(&messages, true, 64 << 10));
        let seconds = now_seconds() - t0;
        let got = match &outcome {
            Ok(_) => "ok",
            Err(TemplateError::Syntax(_)) => "syntax",
            Err(TemplateError::Raised(_)) => "raised",
            Err(TemplateError::Render(_)) => "render",
            Err(TemplateError::Budget { .. }) => "budget",
            Err(TemplateError::TooLong { .. }) => "too-long",
        };
        if got != expect || seconds >= bound {
            wrong.push(format!(
                "{file}: {got} in {seconds:.2} s, expected {expect} within {bound} s ({:?})",
                outcome.map(|s| s.len())
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}
cross_test!(
    hostile_templates,
    hostile_templates_end_in_their_typed_error
);

/// Natively: the directory holds exactly the compiled-in corpus.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn template_corpus_is_complete() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hostile/templates");
    let mut present: Vec<String> = std::fs::read_dir(dir)
        .expect("templates dir")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    present.sort();
    let mut embedded: Vec<&str> = TEMPLATES.iter().map(|(f, _)| *f).collect();
    embedded.sort_unstable();
    assert_eq!(present, embedded);
}
