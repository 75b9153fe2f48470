//! `fuselm generate --model PATH --prompt TEXT [--chat] [--max-tokens N] [--json]`.

use fuselm::gpu::GpuContext;
use fuselm::model::{GenerateOptions, LoadOptions, TextModel};
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
    #[arg(long)]
    system: Option<String>,
    /// Most tokens to generate.
    #[arg(long, default_value_t = 128)]
    max_tokens: u32,
    /// KV-cache capacity in tokens (default: min(model context, 2048)).
    #[arg(long)]
    n_ctx: Option<u32>,
    /// Keep the KV cache in f16 (needs the adapter's shader-f16).
    #[arg(long)]
    kv_f16: bool,
    /// Decode steps per GPU submission.
    #[arg(long)]
    steps_per_submit: Option<u32>,
    /// Print one JSON object (prompt ids, generated ids, text, timings) instead of streaming text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: GenerateArgs) -> Result<(), Box<dyn Error>> {
    pollster::block_on(run_async(args))
}

async fn run_async(args: GenerateArgs) -> Result<(), Box<dyn Error>> {
    let bytes = std::fs::read(&args.model).map_err(|e| format!("{}: {e}", args.model.display()))?;
    let load_start = std::time::Instant::now();
    let ctx = GpuContext::new().await?;
    let adapter = ctx.info.name.clone();
    let load = LoadOptions {
        n_ctx: args.n_ctx,
        max_batch: None,
        kv_f16: Some(args.kv_f16),
    };
    let mut model = TextModel::load(ctx, &bytes, &load).await?;
    let load_seconds = load_start.elapsed().as_secs_f64();
    drop(bytes);
    let options = GenerateOptions {
        max_tokens: Some(args.max_tokens),
        chat: Some(args.chat),
        system: args.system,
        steps_per_submit: args.steps_per_submit,
    };
    let json = args.json;
    let mut stdout = std::io::stdout();
    let result = model
        .generate(&args.prompt, &options, &mut |piece| {
            // Stream as it arrives; a closed stdout stops the generation.
            json || (stdout.write_all(piece.as_bytes()).is_ok() && stdout.flush().is_ok())
        })
        .await?;
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
            "timings": { "loadSeconds": load_seconds, "generate": result.timings },
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
