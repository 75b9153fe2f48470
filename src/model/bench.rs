//! Every strategy side by side, in one process on one device: `fuselm bench` natively and
//! `bench()` in TypeScript produce this same report. Speed figures live here and in
//! bench/results, never in tests.
//!
//! Workloads: with a model, prompts of 16 and 128 tokens and 128 new tokens, and (optionally)
//! decode after ~1,000 tokens of context; with `toy`, synthetic Llama models of d_model
//! 32/64/128/256 with 1 and 4 layers, 64 tokens. Each configuration: a short warm-up, then `runs`
//! measured runs; medians with min/max. Greedy, no stop ids, so every run makes all its tokens.

use super::generation::DEFAULT_CHUNK_TOKENS;
use super::gpu_model::{GenerationRequest, GpuModel, LoadOptions};
use super::profile::StepProfile;
use super::strategy::Strategy;
use super::synthetic::{synthetic_llama, SyntheticSpec};
use crate::error::{FuselmError, Result};
use crate::gguf::GgmlType;
use crate::gpu::{ContextOptions, GpuContext};
use crate::sampling::SamplingOptions;
use serde::{Deserialize, Serialize};

/// What `bench` runs. Every field is optional.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct GenerationBenchOptions {
    /// Measured runs per configuration, after one warm-up. Default: 5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub runs: Option<u32>,
    /// Run the synthetic toy grid. Default: true without a model, false with one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub toy: Option<bool>,
    /// Only the smallest toy sizes (d_model 32 and 64) at one layer, for slow adapters. Default:
    /// false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub small_toy: Option<bool>,
    /// Tokens each toy workload generates after its 8-token prompt (1 to 120; the toy models
    /// hold 128 positions). Default: 64. Software adapters decode the toy models at tens of
    /// tokens per second, so a quick look there can take fewer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub toy_tokens: Option<u32>,
    /// With a model: profile one fused decode step per kernel role. Default: false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub profile: Option<bool>,
    /// With a model: also decode after ~1,000 tokens of context. Default: true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub long_context: Option<bool>,
    /// Fused: the most decode steps per compute pass. Default: 32.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub chunk_tokens: Option<u32>,
    /// Also run the experimental grid megakernel (`megakernel-grid`, native only: a note
    /// says why where it cannot run). Default: false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub megakernel_grid: Option<bool>,
    /// The grid megakernel's workgroup count. Default: the occupancy discovery's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub grid_workgroups: Option<u32>,
    /// Which strategies to run, in this order (each at most once). Default: unfused, fused,
    /// megakernel, then megakernel-grid with `megakernelGrid`. Speed-ups need unfused in the
    /// list; the planner's warning compares only the strategies run. Leaving the megakernel
    /// out saves minutes on a model like SmolLM2, where it decodes at a few tokens per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub strategies: Option<Vec<Strategy>>,
}

/// Median, min and max of a measurement.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub samples: u32,
}

impl Spread {
    pub(crate) fn of(mut v: Vec<f64>) -> Self {
        v.sort_by(f64::total_cmp);
        Self {
            median: v.get(v.len() / 2).copied().unwrap_or(0.0),
            min: v.first().copied().unwrap_or(0.0),
            max: v.last().copied().unwrap_or(0.0),
            samples: v.len() as u32,
        }
    }
}

/// One workload under one strategy.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct GenerationBenchRow {
    pub workload: String,
    pub strategy: Strategy,
    pub prompt_tokens: u32,
    pub new_tokens: u32,
    /// New tokens after the first per second of the time after the first arrived. For the
    /// megakernel, whose tokens arrive together at the end of its one dispatch, this is
    /// `endToEndTokensPerSecond` instead.
    pub decode_tokens_per_second: Spread,
    /// New tokens per second from submitting the prompt to having the last token on the host
    /// (prompt ingestion included): the measure every strategy shares.
    pub end_to_end_tokens_per_second: Spread,
    pub prefill_tokens_per_second: Spread,
    pub time_to_first_token_ms: Spread,
    /// Compute dispatches of one decode step.
    pub dispatches_per_token: u32,
    /// Host microseconds spent recording and submitting one decode step's commands (median
    /// over the runs; 0 for the megakernels, which record one dispatch). Decode is bound by
    /// the host when this nears the step's time (1e6 / decode tok/s). Reports written before
    /// 2026-11-25 lack it.
    pub record_microseconds_per_token: Spread,
    /// Queue submissions per decode step.
    pub submits_per_token: f64,
    /// Weight bytes one decode step streams.
    pub weight_bytes_per_token: u64,
    /// Median decode speed over the unfused strategy's on the same workload (megakernel:
    /// end-to-end over end-to-end, for both megakernels).
    pub speedup_vs_unfused: Option<f64>,
    /// Whether every strategy produced the same ids on this workload.
    pub ids_equal_across_strategies: bool,
    /// Whether this is the strategy the planner (`auto`, the default) picks for this model on
    /// this device (reports written before 2026-11-25 lack it).
    pub picked_by_auto: bool,
    pub generated_ids: Vec<u32>,
}

/// The whole report.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct GenerationBenchReport {
    pub runs: u32,
    pub chunk_tokens: u32,
    pub results: Vec<GenerationBenchRow>,
    /// Fused step profiles (short and, with `longContext`, long context).
    pub profile: Vec<StepProfile>,
    /// The results as a markdown table.
    pub markdown: String,
    /// Strategies that could not run a workload, and why (e.g. a model beyond the fused
    /// kernels' limits); kernels compiled with forced loop bounding (native).
    pub notes: Vec<String>,
    /// Workloads where the planner's choice (the default strategy, `auto`) was not the
    /// fastest end to end on this device, with both figures; also rows of `markdown`.
    pub planner_warnings: Vec<String>,
}

struct Workload {
    name: String,
    prompt: Vec<u32>,
    new_tokens: u32,
}

/// A synthetic prompt of `len` token ids: ids 300..20300 (the same prompts for every model with
/// a real vocabulary), or spread over the whole vocabulary when it is smaller than that.
pub(crate) fn prompt_of(len: usize, vocab: u32) -> Vec<u32> {
    (0..len as u32)
        .map(|i| {
            if vocab > 20_300 {
                300 + ((i % 64) * 7919) % 20000
            } else {
                1 + ((i % 64) * 7919) % (vocab.max(2) - 1)
            }
        })
        .collect()
}

/// Tokens a configuration's warm-up generates.
const WARM_UP_TOKENS: u32 = 4;

async fn measure(
    model: &mut GpuModel,
    w: &Workload,
    strategy: Strategy,
    runs: u32,
    chunk: u32,
) -> Result<GenerationBenchRow> {
    // The megakernels run the whole generation in one dispatch.
    let one_dispatch = model.strategy(strategy).one_dispatch();
    let request = GenerationRequest {
        prompt: &w.prompt,
        max_tokens: w.new_tokens,
        strategy,
        sampler: SamplingOptions::default().resolve(&[])?,
        chunk_tokens: model.strategy(strategy).timed_chunk(chunk, w.new_tokens),
        reuse_prefix: false,
        constraint: None,
        logprobs: None,
    };
    // A warm-up compiles every kernel the runs use (prefill, decode, the head); a few tokens do
    // that as well as all of them (on SwiftShader the whole-length warm-up was half of the
    // bench page's time).
    let warm_up = GenerationRequest {
        max_tokens: w.new_tokens.min(WARM_UP_TOKENS),
        ..request
    };
    model.generate(&warm_up, &mut |_| true).await?;
    let (mut decode, mut prefill, mut ttft) = (Vec::new(), Vec::new(), Vec::new());
    let mut e2e = Vec::new();
    let mut record = Vec::new();
    let mut last = None;
    for _ in 0..runs.max(1) {
        let g = model.generate(&request, &mut |_| true).await?;
        let steps = g.tokens.len().saturating_sub(1) as f64;
        let total = g.prefill_seconds + g.decode_seconds;
        e2e.push(g.tokens.len() as f64 / total.max(1e-9));
        decode.push(if one_dispatch {
            g.tokens.len() as f64 / total.max(1e-9)
        } else if g.decode_seconds > 0.0 {
            steps / g.decode_seconds
        } else {
            0.0
        });
        prefill.push(w.prompt.len() as f64 / g.prefill_seconds.max(1e-9));
        ttft.push(g.prefill_seconds * 1e3);
        record.push(g.record_seconds * 1e6 / (g.decode_steps.max(1) as f64));
        last = Some(g);
    }
    let g = last.unwrap_or_else(|| unreachable!("runs >= 1"));
    let steps = g.decode_steps.max(1) as f64;
    Ok(GenerationBenchRow {
        workload: w.name.clone(),
        strategy,
        prompt_tokens: w.prompt.len() as u32,
        new_tokens: g.tokens.len() as u32,
        decode_tokens_per_second: Spread::of(decode),
        end_to_end_tokens_per_second: Spread::of(e2e),
        prefill_tokens_per_second: Spread::of(prefill),
        time_to_first_token_ms: Spread::of(ttft),
        dispatches_per_token: model.dispatches_per_step(strategy, false)?,
        record_microseconds_per_token: Spread::of(record),
        submits_per_token: (g.submits as f64 - 1.0).max(0.0) / steps,
        weight_bytes_per_token: model.decode_weight_bytes(),
        speedup_vs_unfused: None,
        ids_equal_across_strategies: true,
        picked_by_auto: false,
        generated_ids: g.tokens,
    })
}

/// How each workload is run: measured runs, fused chunk size, the strategies in order.
#[derive(Clone, Copy)]
struct Settings<'a> {
    runs: u32,
    chunk: u32,
    strategies: &'a [Strategy],
}

async fn bench_model(
    model: &mut GpuModel,
    workloads: &[Workload],
    set: Settings<'_>,
    rows: &mut Vec<GenerationBenchRow>,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> Result<()> {
    let Settings {
        runs,
        chunk,
        strategies,
    } = set;
    let (auto, _) = model.default_strategy();
    for w in workloads {
        let mut results = Vec::new();
        for &strategy in strategies {
            match model.prepare_strategy(strategy).await {
                Ok(Some(note)) => notes.push(format!("{}: {note}", w.name)),
                Ok(None) => {}
                Err(e) => {
                    notes.push(format!("{}: {} skipped: {e}", w.name, strategy.name()));
                    continue;
                }
            }
            match measure(model, w, strategy, runs, chunk).await {
                Ok(r) => results.push(r),
                // An adapter that cuts long dispatches short (lavapipe's loop limit) stops
                // the megakernel on large models: a note, not a failed benchmark.
                Err(e) if model.strategy(strategy).one_dispatch() => {
                    notes.push(format!("{}: {} failed: {e}", w.name, strategy.name()));
                }
                Err(e) => return Err(e),
            }
        }
        // A kernel compiled with forced loop bounding (its loops not proved to terminate:
        // `GpuContext::shader`) runs slower than the others: say so beside the figures.
        for module in model.context().unproven_loops() {
            let note = format!("compiled with forced loop bounding: {module}");
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
        let unfused = results
            .iter()
            .find(|r| r.strategy == Strategy::Unfused)
            .map(|r| r.decode_tokens_per_second.median);
        let unfused_e2e = results
            .iter()
            .find(|r| r.strategy == Strategy::Unfused)
            .map(|r| r.end_to_end_tokens_per_second.median);
        let same = results
            .windows(2)
            .all(|p| p[0].generated_ids == p[1].generated_ids);
        let e2e = |r: &GenerationBenchRow| r.end_to_end_tokens_per_second.median;
        let fastest = results.iter().max_by(|a, b| e2e(a).total_cmp(&e2e(b)));
        let picked = results.iter().find(|r| r.strategy == auto);
        if let (Some(f), Some(p)) = (fastest, picked) {
            if f.strategy != p.strategy {
                warnings.push(format!(
                    "{}: auto picks {} ({:.0} tok/s end to end) but {} was faster ({:.0} tok/s)",
                    w.name,
                    p.strategy.name(),
                    e2e(p),
                    f.strategy.name(),
                    e2e(f)
                ));
            }
        }
        for mut r in results {
            r.speedup_vs_unfused = if model.strategy(r.strategy).one_dispatch() {
                unfused_e2e
                    .filter(|u| *u > 0.0)
                    .map(|u| r.end_to_end_tokens_per_second.median / u)
            } else {
                unfused
                    .filter(|u| *u > 0.0)
                    .map(|u| r.decode_tokens_per_second.median / u)
            };
            r.ids_equal_across_strategies = same;
            r.picked_by_auto = r.strategy == auto;
            rows.push(r);
        }
    }
    Ok(())
}

/// The rows as a markdown table.
pub fn markdown(rows: &[GenerationBenchRow]) -> String {
    let mut s = String::from(
        "| workload | strategy | decode tok/s (min–max) | end-to-end tok/s | prefill tok/s | TTFT ms | dispatches/token | submits/token | host µs/token | × unfused | same ids |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let d = &r.decode_tokens_per_second;
        s += &format!(
            "| {} | {} | {:.0} ({:.0}–{:.0}) | {:.0} | {:.0} | {:.2} | {} | {:.3} | {:.0} | {:.1} | {} |\n",
            r.workload,
            if r.picked_by_auto {
                format!("{} (auto)", r.strategy.name())
            } else {
                r.strategy.name().to_string()
            },
            d.median,
            d.min,
            d.max,
            r.end_to_end_tokens_per_second.median,
            r.prefill_tokens_per_second.median,
            r.time_to_first_token_ms.median,
            r.dispatches_per_token,
            r.submits_per_token,
            r.record_microseconds_per_token.median,
            r.speedup_vs_unfused.unwrap_or(0.0),
            if r.ids_equal_across_strategies {
                "yes"
            } else {
                "NO"
            },
        );
    }
    s
}

/// The strategies `options` asks for, in order: `strategies`, else unfused, fused, megakernel
/// (and megakernel-grid when `megakernel_grid` is set).
fn bench_strategies(options: &GenerationBenchOptions) -> Result<Vec<Strategy>> {
    let Some(list) = &options.strategies else {
        let mut all = vec![Strategy::Unfused, Strategy::Fused, Strategy::Megakernel];
        if options.megakernel_grid.unwrap_or(false) {
            all.push(Strategy::MegakernelGrid);
        }
        return Ok(all);
    };
    if list.is_empty() {
        return Err(FuselmError::InvalidArgument(
            "bench: strategies must name at least one strategy".into(),
        ));
    }
    if let Some(s) = (1..list.len()).find_map(|i| list[..i].contains(&list[i]).then_some(list[i])) {
        return Err(FuselmError::InvalidArgument(format!(
            "bench: strategy {} is listed twice",
            s.name()
        )));
    }
    Ok(list.clone())
}

/// The toy models' KV capacity, prompt length and default generation length.
const TOY_CONTEXT: u32 = 128;
const TOY_PROMPT: u32 = 8;
const TOY_TOKENS: u32 = 64;

/// Runs the benchmark: `model` (a GGUF file) if given, and the toy grid when asked (or when
/// there is no model). Each model gets its own device context.
pub async fn bench(
    model: Option<&[u8]>,
    options: &GenerationBenchOptions,
) -> Result<GenerationBenchReport> {
    bench_with(model, options, ContextOptions::default()).await
}

/// [`bench`] with every model's device context created with `context` (kernel measurement
/// settings; the native CLI's `--tune`). `options.grid_workgroups` overrides its
/// `tuning.grid_workgroups`. Every model runs on one device (each in a context of its own,
/// [`GpuContext::sibling`]), so a kernel the models share is compiled once.
pub async fn bench_with(
    model: Option<&[u8]>,
    options: &GenerationBenchOptions,
    mut context: ContextOptions,
) -> Result<GenerationBenchReport> {
    if options.grid_workgroups.is_some() {
        context.tuning.grid_workgroups = options.grid_workgroups;
    }
    let runs = options.runs.unwrap_or(5).max(1);
    let chunk = options.chunk_tokens.unwrap_or(DEFAULT_CHUNK_TOKENS).max(1);
    let toy_tokens = options.toy_tokens.unwrap_or(TOY_TOKENS);
    if !(1..=TOY_CONTEXT - TOY_PROMPT).contains(&toy_tokens) {
        return Err(FuselmError::InvalidArgument(format!(
            "bench: toyTokens must be from 1 to {}; got {toy_tokens}",
            TOY_CONTEXT - TOY_PROMPT
        )));
    }
    let mut rows = Vec::new();
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    let mut profile = Vec::new();
    let strategies = bench_strategies(options)?;
    let device = GpuContext::with_options(context).await?;
    let set = Settings {
        runs,
        chunk,
        strategies: &strategies,
    };
    if let Some(bytes) = model {
        let long = options.long_context.unwrap_or(true);
        let load = LoadOptions {
            n_ctx: Some(if long { 1152 } else { 320 }),
            max_batch: None,
            kv_f16: Some(false),
            strategy: None,
        };
        let mut m = GpuModel::load(device.sibling(context)?, bytes, &load).await?;
        let vocab = m.config().vocab_size;
        let mut workloads = vec![
            Workload {
                name: "prompt 16, 128 new".into(),
                prompt: prompt_of(16, vocab),
                new_tokens: 128,
            },
            Workload {
                name: "prompt 128, 128 new".into(),
                prompt: prompt_of(128, vocab),
                new_tokens: 128,
            },
        ];
        if long {
            workloads.push(Workload {
                name: "context 1024 (prompt 960, 64 new)".into(),
                prompt: prompt_of(960, vocab),
                new_tokens: 64,
            });
        }
        bench_model(
            &mut m,
            &workloads,
            set,
            &mut rows,
            &mut notes,
            &mut warnings,
        )
        .await?;
        if options.profile.unwrap_or(false) && m.check_strategy(Strategy::Fused).is_ok() {
            profile.push(m.profile(Strategy::Fused, &prompt_of(16, vocab), 5).await?);
            if long {
                let prompt = prompt_of(1000, vocab);
                profile.push(m.profile(Strategy::Fused, &prompt, 5).await?);
            }
        }
    }
    if options.toy.unwrap_or(model.is_none()) {
        // The small grid is for software adapters, where each toy model's megakernel takes
        // seconds to compile (4 layers as well: the bench page's CI test 147 s, 2026-11-29).
        let small = options.small_toy.unwrap_or(false);
        let sizes: &[u64] = if small {
            &[32, 64]
        } else {
            &[32, 64, 128, 256]
        };
        let depths: &[u32] = if small { &[1] } else { &[1, 4] };
        for &d in sizes {
            for &layers in depths {
                let spec = SyntheticSpec {
                    n_layers: layers,
                    n_embd: d,
                    n_ff: 4 * d,
                    n_head: (d / 32).max(2),
                    n_head_kv: (d / 32).max(2),
                    matrix_types: vec![GgmlType::Q8_0],
                    embedding_type: GgmlType::Q8_0,
                    tied: true,
                    seed: d + u64::from(layers),
                    ..SyntheticSpec::default()
                };
                let file = synthetic_llama(&spec);
                let load = LoadOptions {
                    n_ctx: Some(TOY_CONTEXT),
                    max_batch: Some(16),
                    kv_f16: Some(false),
                    strategy: None,
                };
                let mut m = GpuModel::load(device.sibling(context)?, &file, &load).await?;
                let w = Workload {
                    name: format!("toy d{d} L{layers}, {toy_tokens} tokens"),
                    prompt: (1..=TOY_PROMPT).collect(),
                    new_tokens: toy_tokens,
                };
                bench_model(&mut m, &[w], set, &mut rows, &mut notes, &mut warnings).await?;
            }
        }
    }
    Ok(GenerationBenchReport {
        runs,
        chunk_tokens: chunk,
        markdown: markdown(&rows)
            + &warnings
                .iter()
                .map(|w| format!("| **warning** | {w} |\n"))
                .collect::<String>(),
        results: rows,
        profile,
        notes,
        planner_warnings: warnings,
    })
}
