//! `fuselm constraint-bench --model PATH --schemas DIR [--seeds 0,1,2] [--max-tokens N]
//! [--strategy S] [--out FILE]`: every JSON Schema of a directory compiled over the model's
//! vocabulary (time, automaton states, masks, the GPU table's bytes), then used for one greedy
//! and one sampled generation per seed, as a chat answer. Prints JSON with every output, for a
//! validator that is not fuselm (`scripts/validate-schema-outputs.mjs`, ajv) to check.

use crate::bench_cmd::{commit, today};
use fuselm::constraint::{ResponseFormat, VocabBytes};
use fuselm::gpu::GpuContext;
use fuselm::kernels::constraint::table_len;
use fuselm::model::{GenerateOptions, LoadOptions, Prompt, Strategy};
use fuselm::sampling::SamplingOptions;
use std::error::Error;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

#[derive(clap::Args)]
pub struct ConstraintBenchArgs {
    /// A GGUF model.
    #[arg(long)]
    model: PathBuf,
    /// A directory of JSON Schemas (`*.json`), taken in name order.
    #[arg(long)]
    schemas: PathBuf,
    /// A sampled generation (temperature 0.8, top-p 0.95) per seed, besides the greedy one.
    #[arg(long, value_delimiter = ',', default_values_t = [1u64, 2, 3])]
    seeds: Vec<u64>,
    /// Most tokens per generation.
    #[arg(long, default_value_t = 256)]
    max_tokens: u32,
    /// The strategy (default: the planner's choice among those that follow constraints).
    #[arg(long)]
    strategy: Option<String>,
    /// Write the JSON here (else stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: ConstraintBenchArgs) -> Result<(), Box<dyn Error>> {
    pollster::block_on(run_async(args))
}

async fn run_async(args: ConstraintBenchArgs) -> Result<(), Box<dyn Error>> {
    let strategy = args.strategy.as_deref().map(Strategy::parse).transpose()?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(&args.schemas)
        .map_err(|e| format!("{}: {e}", args.schemas.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    let ctx = GpuContext::new().await?;
    let adapter = ctx.info.name.clone();
    let mut model =
        crate::model_file::load_streamed(&args.model, ctx, LoadOptions::default(), None).await?;
    let vocab = Arc::new(VocabBytes::from_tokenizer(
        model.tokenizer(),
        &model.stop_ids(),
    ));
    let mut rows = Vec::new();
    for path in &files {
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = std::fs::read_to_string(path)?;
        let schema: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let format = ResponseFormat::JsonSchema {
            schema: schema.clone(),
            max_depth: None,
            or_text: None,
        };
        // The compile alone (the generation below compiles again through the model's cache).
        let t0 = Instant::now();
        let compiled = format.compile(&vocab);
        let compile_ms = t0.elapsed().as_secs_f64() * 1e3;
        let automaton = match compiled {
            Ok(Some(c)) => c.automaton,
            Ok(None) => unreachable!("a JSON Schema is a constraint"),
            Err(e) => {
                rows.push(serde_json::json!({ "schema": name, "error": e.to_string() }));
                eprintln!("{name}: {e}");
                continue;
            }
        };
        let subject = name.trim_start_matches(|c: char| c.is_ascii_digit() || c == '-');
        let prompt = format!(
            "Write one realistic example of a {} as JSON.",
            subject.replace('-', " ")
        );
        let mut generations = Vec::new();
        let samplings = std::iter::once(None).chain(args.seeds.iter().map(|&s| Some(s)));
        for seed in samplings {
            let sampling = match seed {
                None => SamplingOptions::default(),
                Some(seed) => SamplingOptions {
                    temperature: Some(0.8),
                    top_p: Some(0.95),
                    seed: Some(seed),
                    ..Default::default()
                },
            };
            let options = GenerateOptions {
                max_tokens: Some(args.max_tokens),
                chat: Some(true),
                system: Some("You answer with JSON only.".into()),
                strategy,
                response_format: Some(format.clone()),
                sampling,
                ..Default::default()
            };
            let r = model
                .generate(Prompt::Text(&prompt), &options, &mut |_, _| true)
                .await
                .map_err(|e| format!("{name}: {e}"))?;
            generations.push(serde_json::json!({
                "seed": seed,
                "text": r.text,
                "stopReason": r.stop_reason,
                "tokens": r.tokens.len(),
                "decodeTokensPerSecond": r.timings.decode_tokens_per_second,
            }));
        }
        rows.push(serde_json::json!({
            "schema": name,
            "compileMs": compile_ms,
            "states": automaton.n_token_states(),
            "masks": automaton.n_masks(),
            "tableBytes": table_len(&automaton) * 4,
            "generations": generations,
        }));
        eprintln!("{name}: compiled in {compile_ms:.1} ms");
    }
    let out = serde_json::json!({
        "kind": "constraint-bench",
        "date": today(),
        "commit": commit(),
        "adapter": adapter,
        "model": args.model.file_name().map(|f| f.to_string_lossy().into_owned()),
        "maxTokens": args.max_tokens,
        "strategy": strategy.map(|s| s.name()),
        "schemas": rows,
    });
    let text = serde_json::to_string_pretty(&out)?;
    match &args.out {
        Some(p) => std::fs::write(p, text)?,
        None => out!("{text}"),
    }
    Ok(())
}
