//! `fuselm generate --model PATH --prompt TEXT [--chat] [--max-tokens N] [--strategy S]
//! [--calibrate] [--temperature T --top-k K --top-p P --min-p M --seed S ...] [--stop TEXT ...]
//! [--no-context-shift] [--keep-tokens N] [--json-schema FILE | --json-object | --regex PATTERN]
//! [--max-depth N] [--json]
//! [--load-session FILE] [--save-session FILE] [--tune NAME=VALUE ...]` (`--tune`: kernel
//! measurement settings, see `--help`).

use crate::tune_args::TuneArgs;
use fuselm::constraint::ResponseFormat;
use fuselm::gpu::GpuContext;
use fuselm::model::{
    CalibrateOptions, GenerateOptions, LoadOptions, MemoryBudget, Prompt, Strategy,
};
use fuselm::sampling::SamplingOptions;
use std::error::Error;
use std::io::Write;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct GenerateArgs {
    /// A GGUF model file (llama family).
    #[arg(long)]
    model: PathBuf,
    /// The prompt text.
    #[arg(long)]
    prompt: String,
    /// Render the prompt as a user message with the model's chat template.
    #[arg(long)]
    chat: bool,
    /// With --chat: a system message instead of the template's default.
    #[arg(long, requires = "chat")]
    system: Option<String>,
    /// Most tokens to generate (default: 128; with --no-context-shift, at most what the prompt
    /// leaves of the context).
    #[arg(long)]
    max_tokens: Option<u32>,
    /// Past the context (--n-ctx), fail instead of dropping the oldest tokens after the kept
    /// ones (the context shift, on by default).
    #[arg(long)]
    no_context_shift: bool,
    /// Tokens a context shift never drops (default: the system message's with --chat, else 1).
    #[arg(long)]
    keep_tokens: Option<u32>,
    /// KV-cache capacity in tokens (default: min(model context, 2048)).
    #[arg(long)]
    n_ctx: Option<u32>,
    /// Refuse the model, from its header and before reading its weights, when its estimated GPU
    /// memory (weights, KV cache at --n-ctx, activations) passes this many bytes.
    #[arg(long, value_name = "BYTES")]
    memory_budget: Option<u64>,
    /// Keep the KV cache in f16 (needs the adapter's shader-f16).
    #[arg(long)]
    kv_f16: bool,
    /// fused, unfused (the one-dispatch-per-operation baseline), megakernel or megakernel-grid
    /// (experimental, native only). Default: the planner's choice, printed to stderr with its
    /// reason.
    #[arg(long)]
    strategy: Option<String>,
    /// megakernel-grid: its workgroup count (default: the occupancy discovery's; the same as
    /// --tune grid-workgroups=N).
    #[arg(long)]
    grid_workgroups: Option<u32>,
    /// Before generating, time every strategy that can win on a short greedy generation and use
    /// the fastest (the calibration is printed to stderr as JSON). Ignored with --strategy.
    #[arg(long)]
    calibrate: bool,
    /// Fused: decode steps per compute pass (tokens stream at these boundaries).
    #[arg(long)]
    chunk_tokens: Option<u32>,
    /// Sampling temperature; 0 (default) is greedy.
    #[arg(long)]
    temperature: Option<f32>,
    #[arg(long)]
    top_k: Option<u32>,
    #[arg(long)]
    top_p: Option<f32>,
    #[arg(long)]
    min_p: Option<f32>,
    #[arg(long)]
    repetition_penalty: Option<f32>,
    #[arg(long)]
    frequency_penalty: Option<f32>,
    #[arg(long)]
    presence_penalty: Option<f32>,
    #[arg(long)]
    penalty_last_n: Option<u32>,
    #[arg(long)]
    seed: Option<u64>,
    /// A stop sequence (repeatable): generation ends when the text contains it; it is not printed.
    #[arg(long)]
    stop: Vec<String>,
    /// The output must be JSON valid under the JSON Schema in FILE (README: "Structured
    /// output" lists the keywords).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["json_object", "regex", "grammar"])]
    json_schema: Option<PathBuf>,
    /// The output must be a JSON object.
    #[arg(long, conflicts_with_all = ["regex", "grammar"])]
    json_object: bool,
    /// The whole output must match this regular expression (Rust regex syntax).
    #[arg(long, value_name = "PATTERN", conflicts_with = "grammar")]
    regex: Option<String>,
    /// The output must match the root rule of the GBNF grammar (llama.cpp's format) in FILE.
    #[arg(long, value_name = "FILE")]
    grammar: Option<PathBuf>,
    /// With --json-schema, --json-object or --grammar: nesting levels (times a recursive rule
    /// may appear inside itself) unrolled (default 5; 3 for grammars).
    #[arg(long)]
    max_depth: Option<u32>,
    /// Report each generated token's log-probability (in --json's `logprobs`; fused and
    /// unfused strategies).
    #[arg(long)]
    logprobs: bool,
    /// With --logprobs: the most likely alternatives per token to report (0-20).
    #[arg(long, value_name = "N", requires = "logprobs")]
    top_logprobs: Option<u32>,
    /// Print one JSON object (prompt ids, generated ids, text, timings) instead of streaming text.
    #[arg(long)]
    json: bool,
    /// Restore a session saved by --save-session (this model file, the same --kv-f16) first:
    /// a prompt that starts with its tokens prefills only what follows.
    #[arg(long, value_name = "FILE")]
    load_session: Option<PathBuf>,
    /// After the generation, save the session (the prompt's and the output's KV cache) here.
    #[arg(long, value_name = "FILE")]
    save_session: Option<PathBuf>,
    #[command(flatten)]
    tune: TuneArgs,
}

/// The response format the flags ask for (None: free text).
fn response_format(args: &GenerateArgs) -> Result<Option<ResponseFormat>, Box<dyn Error>> {
    if args.max_depth.is_some()
        && args.json_schema.is_none()
        && !args.json_object
        && args.grammar.is_none()
    {
        return Err("--max-depth needs --json-schema, --json-object or --grammar".into());
    }
    Ok(if let Some(path) = &args.json_schema {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let schema = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
        Some(ResponseFormat::JsonSchema {
            schema,
            max_depth: args.max_depth,
            or_text: None,
        })
    } else if let Some(path) = &args.grammar {
        let grammar =
            std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Some(ResponseFormat::Grammar {
            grammar,
            max_depth: args.max_depth,
        })
    } else if args.json_object {
        Some(ResponseFormat::JsonObject {
            max_depth: args.max_depth,
        })
    } else {
        args.regex.as_ref().map(|pattern| ResponseFormat::Regex {
            pattern: pattern.clone(),
        })
    })
}

pub fn run(args: GenerateArgs) -> Result<(), Box<dyn Error>> {
    pollster::block_on(run_async(args))
}

async fn run_async(args: GenerateArgs) -> Result<(), Box<dyn Error>> {
    let response_format = response_format(&args)?;
    let load_start = std::time::Instant::now();
    let mut context = args.tune.context_options()?;
    if args.grid_workgroups.is_some() {
        context.tuning.grid_workgroups = args.grid_workgroups;
    }
    let ctx = GpuContext::with_options(context).await?;
    let adapter = ctx.info.name.clone();
    let load = LoadOptions {
        n_ctx: args.n_ctx,
        max_batch: None,
        kv_f16: Some(args.kv_f16),
        strategy: None,
    };
    let budget = args
        .memory_budget
        .map(|budget| MemoryBudget { budget, in_use: 0 });
    let mut model = crate::model_file::load_streamed(&args.model, ctx, load, budget).await?;
    let memory = model.gpu().memory();
    eprintln!(
        "[GPU memory {} bytes: weights {}, KV cache {}, activations {}, other {}]",
        memory.total, memory.weights, memory.kv_cache, memory.activations, memory.other
    );
    let load_seconds = load_start.elapsed().as_secs_f64();
    let trained = model.config().context_length;
    if let Some(n) = args.n_ctx.filter(|&n| trained > 0 && n > trained) {
        eprintln!(
            "[warning: --n-ctx {n} is beyond the {trained} tokens the model was trained on; \
             text past them may degrade]"
        );
    }
    let strategy = match &args.strategy {
        Some(s) => Strategy::parse(s)?,
        None => {
            if args.calibrate {
                let c = model.gpu().calibrate(&CalibrateOptions::default()).await?;
                eprintln!("[calibration {}]", serde_json::to_string(&c)?);
            }
            let (s, why) = model.gpu().default_strategy();
            let constrained = model
                .gpu()
                .default_strategy_with(response_format.is_some(), args.logprobs);
            if constrained == s {
                eprintln!("[strategy {why}]");
            } else {
                eprintln!(
                    "[strategy {}: {} does not follow constraints or report logprobs]",
                    constrained.name(),
                    s.name()
                );
            }
            constrained
        }
    };
    if let Some(path) = &args.load_session {
        let bytes =
            std::fs::read(path).map_err(|e| format!("--load-session {}: {e}", path.display()))?;
        let info = model.gpu().load_session(&bytes).await?;
        eprintln!(
            "[session: {} tokens restored from {}]",
            info.tokens,
            path.display()
        );
    }
    let options = GenerateOptions {
        max_tokens: args.max_tokens,
        chat: Some(args.chat),
        system: args.system,
        strategy: Some(strategy),
        chunk_tokens: args.chunk_tokens,
        stop: Some(args.stop),
        reuse_prefix: Some(args.load_session.is_some()),
        context_shift: Some(!args.no_context_shift),
        keep_tokens: args.keep_tokens,
        response_format,
        logprobs: Some(args.logprobs),
        top_logprobs: args.top_logprobs,
        sampling: SamplingOptions {
            temperature: args.temperature,
            top_k: args.top_k,
            top_p: args.top_p,
            min_p: args.min_p,
            repetition_penalty: args.repetition_penalty,
            frequency_penalty: args.frequency_penalty,
            presence_penalty: args.presence_penalty,
            penalty_last_n: args.penalty_last_n,
            seed: args.seed,
        },
    };
    let json = args.json;
    let mut stdout = std::io::stdout();
    let result = model
        .generate(Prompt::Text(&args.prompt), &options, &mut |piece, _| {
            // Stream as it arrives; a closed stdout stops the generation.
            json || (stdout.write_all(piece.as_bytes()).is_ok() && stdout.flush().is_ok())
        })
        .await?;
    if let Some(path) = &args.save_session {
        let (bytes, info) = model.gpu().save_session().await?;
        std::fs::write(path, &bytes)
            .map_err(|e| format!("--save-session {}: {e}", path.display()))?;
        eprintln!(
            "[session: {} tokens, {} bytes saved to {}]",
            info.tokens,
            info.bytes,
            path.display()
        );
    }
    if json {
        let out = serde_json::json!({
            "model": args.model,
            "adapter": adapter,
            "prompt": args.prompt,
            "chat": args.chat,
            "promptIds": result.prompt_tokens,
            "generatedIds": result.tokens,
            "text": result.text,
            "stopReason": result.stop_reason,
            "strategy": strategy.name(),
            "gridWorkgroups": model.gpu().strategy_workgroups(Strategy::MegakernelGrid),
            "timings": { "loadSeconds": load_seconds, "generate": result.timings },
            "logprobs": result.logprobs,
            "reusedPromptTokens": result.reused_prompt_tokens,
            "droppedTokens": result.dropped_tokens,
        });
        out!("{}", serde_json::to_string_pretty(&out)?);
    } else {
        out!();
        eprintln!(
            "[{} prompt tokens, {} generated ({:?}); prefill {:.1} tok/s, decode {:.1} tok/s]",
            result.prompt_tokens.len(),
            result.tokens.len(),
            result.stop_reason,
            result.timings.prompt_tokens_per_second,
            result.timings.decode_tokens_per_second
        );
    }
    Ok(())
}
