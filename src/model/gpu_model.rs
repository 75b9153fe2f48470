//! A GGUF model resident on the GPU.
//!
//! Load uploads the weights quantized, builds what every strategy shares (`shared.rs`: the
//! per-operation kernels and prefill, activations and KV cache of fixed capacity `n_ctx`, the
//! sampler's buffers), registers every strategy (`strategy/`) and builds the default one when
//! it builds at load (the others build on first use), so nothing is allocated per token. `GpuModel` itself keeps the shared buffers, which prompt prefix the KV cache holds,
//! and the planner's choice; a generation is handed to the strategy that runs it.

use super::generation::{Progress, Run, RunConstraint, Segment, StopReason, TokenGeneration};
use super::gpu_weights::ModelWeights;
use super::memory::{estimate_sized, MemoryUse};
use super::profile::StepProfile;
use super::shared::{check_fit, LoadScopes, Shared, Sizes};
use super::strategy::planner::Planner;
use super::strategy::seam::GenerationStrategy;
use super::strategy::{Strategies, Strategy};
use crate::constraint::Constraint;
use crate::error::{FuselmError, Result};
use crate::gguf::{Gguf, ModelConfig};
use crate::gpu::GpuContext;
use crate::kernels::constraint::ConstraintTable;
use crate::kernels::{KvFormat, KvShift};
use crate::sampling::logprobs::TOP_LOGPROBS_MAX;
use crate::sampling::{SamplerParams, SamplingOptions};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How to size a loaded model's buffers, and the strategy it runs by default.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct LoadOptions {
    /// KV-cache capacity in tokens (prompt + generated). Default: min(model context, 2048).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub n_ctx: Option<u32>,
    /// Prompt tokens processed per prefill batch (an abort takes effect between batches).
    /// Default: up to 1,024 (fewer where a batch's activations would pass 96 MiB, or `nCtx`);
    /// 128 on software adapters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub max_batch: Option<u32>,
    /// Keep the KV cache in f16 (half the memory and attention bandwidth; rounds K and V to
    /// f16, as llama.cpp does by default). Needs the adapter's `shader-f16` feature (see
    /// `probe().features.shaderF16`); without it loading fails with "invalid-argument".
    /// Default: false (f32, exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub kv_f16: Option<bool>,
    /// The strategy generations use when they name none, instead of the planner's choice
    /// (`info.strategy` says which, until `calibrate` or `useCalibration` makes another the
    /// default). Loading fails with the reason where it cannot run this model on this adapter.
    /// Default: the planner's choice (fused on GPUs, unfused on software adapters, the
    /// megakernel for very small models; `info.strategyReason` says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub strategy: Option<Strategy>,
}

const DEFAULT_N_CTX: u32 = 2048;
/// The default prefill batch: as many tokens as keep its activations within 96 MiB, from 128 to
/// 1,024 in steps of 64 (the tiled prefill kernels gain up to ~1,000-token batches: bench/NOTES.md,
/// "Prefill kernels"); 128 on software adapters, where a batch takes seconds and an abort waits
/// for it.
const DEFAULT_MAX_BATCH: u32 = 1024;
const SOFTWARE_MAX_BATCH: u32 = 128;
const BATCH_ACTIVATION_BYTES: u64 = 96 << 20;

fn default_max_batch(config: &ModelConfig, software: bool) -> u32 {
    if software {
        return SOFTWARE_MAX_BATCH;
    }
    let c = config;
    let q = u64::from(c.n_head) * u64::from(c.head_dim);
    let kv = u64::from(c.n_head_kv) * u64::from(c.head_dim);
    // x, xn, o; q, att; k, k_raw, v; gate, up, hidden (activations.rs), 4 bytes each.
    let per_token = 4 * (3 * u64::from(c.n_embd) + 2 * q + 3 * kv + 3 * u64::from(c.n_ff)).max(1);
    let fits = (BATCH_ACTIVATION_BYTES / per_token) / 64 * 64;
    fits.clamp(u64::from(SOFTWARE_MAX_BATCH), u64::from(DEFAULT_MAX_BATCH)) as u32
}

impl LoadOptions {
    /// KV capacity, prefill batch and KV format of a load of `config` on an adapter that is
    /// `software` or not; `nCtx` or `maxBatch` of 0 is an error naming the option.
    pub(crate) fn sizes(&self, config: &ModelConfig, software: bool) -> Result<Sizes> {
        for (name, value) in [("nCtx", self.n_ctx), ("maxBatch", self.max_batch)] {
            if value == Some(0) {
                return Err(FuselmError::InvalidArgument(format!(
                    "{name} must be at least 1, got 0"
                )));
            }
        }
        let n_ctx = self
            .n_ctx
            .unwrap_or(config.context_length.min(DEFAULT_N_CTX))
            .max(1);
        let max_batch = self
            .max_batch
            .unwrap_or_else(|| default_max_batch(config, software))
            .clamp(1, n_ctx);
        let kv = if self.kv_f16.unwrap_or(false) {
            KvFormat::F16
        } else {
            KvFormat::F32
        };
        Ok(Sizes {
            n_ctx,
            max_batch,
            kv,
        })
    }
}

/// One generation's inputs, in token ids.
#[derive(Debug, Clone)]
pub struct GenerationRequest<'a> {
    pub prompt: &'a [u32],
    pub max_tokens: u32,
    pub strategy: Strategy,
    /// Resolved sampling settings, including the stop ids.
    pub sampler: SamplerParams,
    /// Fused: the most decode steps per compute pass (`ChunkRamp` picks each chunk's);
    /// megakernel: tokens per dispatch (the host sees tokens at these boundaries).
    pub chunk_tokens: u32,
    /// Keep the KV-cache rows of the longest prefix this prompt shares with what the previous
    /// generation left in the cache, and prefill only the rest (multi-turn chat). Off: a fresh
    /// context, every prompt token prefilled.
    pub reuse_prefix: bool,
    /// The constraint the output must follow (fused and unfused only).
    pub constraint: Option<&'a Arc<Constraint>>,
    /// Report each token's log-probability with this many alternatives (at most
    /// `TOP_LOGPROBS_MAX`; fused and unfused only); None: none.
    pub logprobs: Option<u32>,
}

/// How many weight matrices use one ggml type, and their bytes on the GPU.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct QuantUse {
    /// ggml's name: "Q4_1", "Q8_0", "F16", …
    pub ggml_type: String,
    pub matrices: u32,
    pub bytes: u64,
}

/// What loading `gguf` with `options` on `ctx`'s device will hold right after the load (no
/// megakernel arena yet), from the header alone; refused with the typed reason where the model
/// cannot load there at all (`check_fit`). Tests hold it to the loaded model's
/// [`GpuModel::memory`]: weights, KV cache and activations exactly,
/// `total` at least the loaded model's and within [`OTHER_ALLOWANCE`](super::OTHER_ALLOWANCE) of it.
pub fn estimate_memory(ctx: &GpuContext, gguf: &Gguf, options: &LoadOptions) -> Result<MemoryUse> {
    let config = ModelConfig::from_gguf(gguf)?;
    let sizes = options.sizes(&config, ctx.identity.is_software)?;
    check_fit(ctx, &config, gguf, sizes)?;
    estimate_sized(&config, gguf, sizes)
}

pub struct GpuModel {
    pub(super) shared: Shared,
    pub(super) strategies: Strategies,
    pub(super) planner: Planner,
    /// The tokens whose KV-cache rows `0..len` are valid: what the last generation left behind,
    /// so the next one can skip the prefill of a shared prefix (`reuse_prefix`).
    pub(super) kv_valid: Vec<u32>,
    /// The KV caches holding `kv_valid`'s rows: a strategy's own, or `None` for the shared one
    /// (a generation leaves one; a restored session can fill two, `model::session`).
    pub(super) kv_caches: Vec<Option<Strategy>>,
    /// The last constraint uploaded, kept while the next generation uses the same one.
    pub(super) constraint: Option<(Arc<Constraint>, ConstraintTable)>,
    /// The context shift's kernels, one per KV format, built on the first shift.
    pub(super) kv_shifts: Vec<KvShift>,
    /// After a context shift: the cached tokens then (`kv_valid`) and the tokens they stand
    /// for (with the dropped ones), so the next turn's prompt maps onto the shifted cache.
    pub(super) kv_origin: Option<(Vec<u32>, Vec<u32>)>,
}

impl GpuModel {
    /// Parses `file` (a whole GGUF), uploads its weights and builds the kernels (the default
    /// strategy's when it builds at load; the others on first use).
    pub async fn load(ctx: GpuContext, file: &[u8], options: &LoadOptions) -> Result<Self> {
        let gguf = Gguf::parse(file)?;
        Self::load_parsed(ctx, &gguf, file, options).await
    }

    pub async fn load_parsed(
        ctx: GpuContext,
        gguf: &Gguf,
        file: &[u8],
        options: &LoadOptions,
    ) -> Result<Self> {
        let config = ModelConfig::from_gguf(gguf)?;
        check_fit(
            &ctx,
            &config,
            gguf,
            options.sizes(&config, ctx.identity.is_software)?,
        )?;
        // Out-of-memory and validation errors while uploading and binding become a typed error
        // (natively wgpu would otherwise panic; browsers would only log them).
        let scopes = LoadScopes::push(&ctx);
        let weights = ModelWeights::upload(&ctx, gguf, file, &config)?;
        Self::from_weights(ctx, config, weights, options, scopes).await
    }

    /// The rest of a load once every weight is on the GPU: kernels, buffers and bindings. The
    /// error scopes pushed before the upload are popped here.
    pub(crate) async fn from_weights(
        ctx: GpuContext,
        config: ModelConfig,
        weights: ModelWeights,
        options: &LoadOptions,
        scopes: LoadScopes,
    ) -> Result<Self> {
        let sizes = options.sizes(&config, ctx.identity.is_software)?;
        let planner = Planner::new(options.strategy);
        let built = async {
            let shared = Shared::build(ctx, config, weights, sizes).await?;
            let mut strategies = Strategies::load(&shared).await?;
            // The default strategy is built now when it builds at load (fused); the others on
            // first use. A build that fails is kept: the planner then passes over it.
            let (default, _) = planner.choose(&strategies, &shared);
            let state = strategies.get_mut(default);
            if state.build_at_load() {
                let _ = state.prepare(&shared).await;
            }
            Ok::<_, FuselmError>((shared, strategies))
        }
        .await;
        scopes.pop().await?;
        let (shared, strategies) = built?;
        if let Some(s) = options.strategy {
            strategies.get(s).check(&shared)?;
        }
        Ok(Self {
            shared,
            strategies,
            planner,
            kv_valid: Vec::new(),
            kv_caches: vec![None],
            constraint: None,
            kv_shifts: Vec::new(),
            kv_origin: None,
        })
    }

    /// The weight matrices' formats: how many matrices and GPU bytes each format has.
    pub fn quant_types(&self) -> Vec<QuantUse> {
        let mut out: Vec<QuantUse> = Vec::new();
        for w in self.shared.weights.matrices() {
            let name = w.format.ggml().name();
            match out.iter_mut().find(|q| q.ggml_type == name) {
                Some(q) => {
                    q.matrices += 1;
                    q.bytes += w.gpu_bytes();
                }
                None => out.push(QuantUse {
                    ggml_type: name.to_string(),
                    matrices: 1,
                    bytes: w.gpu_bytes(),
                }),
            }
        }
        out
    }

    /// GPU memory this model holds, by purpose.
    pub fn memory(&self) -> MemoryUse {
        let m = &self.shared;
        let a = &m.acts;
        let kv_cache: u64 = a.k_cache.iter().chain(&a.v_cache).map(|b| b.size).sum();
        let activations = a.bytes() + m.sampler.bytes();
        let weights = m.weights.gpu_bytes();
        let megakernel = self.strategies.bytes();
        // Every buffer the model's context holds: what the parts above leave is `other`.
        let total = m.ctx.bytes_held();
        MemoryUse {
            weights,
            kv_cache,
            activations,
            megakernel,
            other: total.saturating_sub(weights + kv_cache + activations + megakernel),
            total,
        }
    }

    /// Bytes of one KV-cache value (4 for f32, 2 for f16).
    pub fn kv_bytes_per_value(&self) -> u64 {
        self.shared.kv.bytes()
    }

    /// Bytes of the output head on the GPU.
    pub fn head_bytes(&self) -> u64 {
        self.shared.head_bytes()
    }

    /// Weight bytes one decode step streams: every layer matrix and the output head (the
    /// norms and one embedding row are negligible and not counted).
    pub fn decode_weight_bytes(&self) -> u64 {
        self.shared.decode_weight_bytes()
    }

    /// The most prompt tokens one prefill batch takes (`LoadOptions::max_batch`).
    pub fn max_batch(&self) -> u32 {
        self.shared.acts.max_batch
    }

    pub fn config(&self) -> &ModelConfig {
        &self.shared.config
    }

    pub fn n_ctx(&self) -> u32 {
        self.shared.acts.n_ctx
    }

    pub fn context(&self) -> &GpuContext {
        &self.shared.ctx
    }

    /// The logits that follow `tokens` (a fresh context): `[vocab]`.
    pub async fn next_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let m = &self.shared;
        m.check_tokens(tokens, 0)?;
        self.kv_valid.clear();
        let last = m
            .prefill_all_but_last(tokens, 0, &|| true)
            .await?
            .unwrap_or(0);
        m.submit(|pass| m.prefill.record(pass, tokens.len() as u32 - last))?;
        let bytes = m
            .read(&m.acts.logits, u64::from(m.config.vocab_size) * 4)
            .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Teacher forcing: the logits after every prefix of `tokens` (a fresh context),
    /// `[tokens.len(), vocab]`. At most `max_batch` tokens.
    pub async fn all_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.shared.check_tokens(tokens, 0)?;
        let n = tokens.len() as u32;
        if n > self.shared.acts.max_batch {
            return Err(FuselmError::InvalidArgument(format!(
                "all_logits takes at most maxBatch = {} tokens, got {n}",
                self.shared.acts.max_batch
            )));
        }
        self.kv_valid.clear();
        if self.shared.add_all_logits()? {
            // The strategies were bound to the old activations.
            self.strategies.rebind(&self.shared).await?;
        }
        let m = &self.shared;
        let step = m
            .all_logits
            .as_ref()
            .ok_or_else(|| FuselmError::Gpu("all-logits step missing".into()))?;
        m.ctx
            .queue
            .write_buffer(&m.acts.tokens, 0, bytemuck::cast_slice(tokens));
        m.write_state(0, n);
        m.submit(|pass| step.record(pass, n))?;
        let logits_all = m
            .acts
            .logits_all
            .as_ref()
            .ok_or_else(|| FuselmError::Gpu("all-logits buffer missing".into()))?;
        let bytes = m
            .read(
                logits_all,
                u64::from(n) * u64::from(m.config.vocab_size) * 4,
            )
            .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Generates up to `req.max_tokens` tokens after `req.prompt` with `req.strategy` (a
    /// fresh context unless `req.reuse_prefix`). `on_token(id)` sees each token as the host
    /// receives it and returns false to abort; a stop id ends the generation and is not
    /// included.
    pub async fn generate(
        &mut self,
        req: &GenerationRequest<'_>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<TokenGeneration> {
        self.generate_until(req, on_token, &|| true).await
    }

    /// [`GpuModel::generate`], asking `keep_going` between prefill batches: false stops the
    /// generation there (`StopReason::Aborted`), so an abort does not wait for a long prompt.
    pub async fn generate_until(
        &mut self,
        req: &GenerationRequest<'_>,
        on_token: &mut dyn FnMut(u32) -> bool,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<TokenGeneration> {
        self.generate_shifting(req, None, on_token, keep_going)
            .await
    }

    /// One run of a strategy: `seg` says which tokens (the request's, or a context shift's
    /// continuation of them) and how the constraint and the sampler's seed continue.
    pub(super) async fn run_segment(
        &mut self,
        req: &GenerationRequest<'_>,
        seg: &Segment<'_>,
        on_token: &mut dyn FnMut(u32) -> bool,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<TokenGeneration> {
        self.shared.check_tokens(seg.prompt, seg.max_tokens)?;
        if seg.prompt.is_empty() {
            return Err(FuselmError::InvalidArgument(
                "the prompt must hold at least one token".into(),
            ));
        }
        if seg.max_tokens == 0 {
            return Progress::new().finish();
        }
        // The last prompt token is always run: its logits choose the first new token. A
        // strategy with its own KV cache reuses a prefix only from that cache.
        let owner = self
            .strategies
            .get(req.strategy)
            .own_kv_cache()
            .then_some(req.strategy);
        let start = if seg.reuse_prefix && self.kv_caches.contains(&owner) {
            let shared = self
                .kv_valid
                .iter()
                .zip(seg.prompt)
                .take_while(|(a, b)| a == b)
                .count();
            shared.min(seg.prompt.len() - 1) as u32
        } else {
            0
        };
        if let Some(n) = req.logprobs {
            if n > TOP_LOGPROBS_MAX {
                return Err(FuselmError::InvalidArgument(format!(
                    "topLogprobs (top_logprobs) must be at most {TOP_LOGPROBS_MAX}, got {n}"
                )));
            }
            if !self.strategies.get(req.strategy).logprobs() {
                return Err(FuselmError::InvalidArgument(format!(
                    "logprobs: the {} strategy does not report log-probabilities; use fused \
                     or unfused",
                    req.strategy.name()
                )));
            }
        }
        let mut sampler = req.sampler;
        sampler.seed_lo ^= seg.seed_mix;
        if let Some(c) = req.constraint {
            if !self.strategies.get(req.strategy).constraints() {
                return Err(FuselmError::InvalidArgument(format!(
                    "responseFormat: the {} strategy does not follow constraints; use fused \
                     or unfused",
                    req.strategy.name()
                )));
            }
            if c.automaton.vocab.n_vocab != self.shared.config.vocab_size {
                return Err(FuselmError::InvalidArgument(
                    "responseFormat: the constraint was compiled for another vocabulary".into(),
                ));
            }
            if !self
                .constraint
                .as_ref()
                .is_some_and(|(k, _)| Arc::ptr_eq(k, c))
            {
                let table = ConstraintTable::upload(&self.shared.ctx, &c.automaton)?;
                if let Some((_, old)) = self.constraint.replace((c.clone(), table)) {
                    self.shared.ctx.release(&old.buffer);
                }
            }
            sampler.constrained = 1;
        }
        let constraint = match (&self.constraint, req.constraint) {
            (Some((c, table)), Some(_)) => Some(RunConstraint {
                automaton: &c.automaton,
                table,
                start: seg.constraint_state.unwrap_or(table.start),
            }),
            _ => None,
        };
        // Until this generation ends well, the cache holds nothing reusable.
        self.kv_valid.clear();
        self.kv_caches = vec![owner];
        let run = Run {
            prompt: seg.prompt,
            max_tokens: seg.max_tokens,
            sampler,
            chunk_tokens: req.chunk_tokens,
            start,
            constraint,
            keep_going,
            logprobs: req.logprobs,
        };
        let mut out = self
            .strategies
            .get_mut(req.strategy)
            .generate(&self.shared, &run, on_token)
            .await?;
        out.reused_prompt_tokens = start;
        // Stopped before its first token (an abort during prefill: only the batches before it
        // were written): nothing in the cache is known to be reusable.
        if out.stop_reason == StopReason::Aborted && out.tokens.is_empty() {
            return Ok(out);
        }
        // Rows written for sure: the prompt's, and every accepted token's but the last (its row
        // is written by the step after it, which ran only if the generation went on).
        self.kv_valid.extend_from_slice(seg.prompt);
        let kept = out.tokens.len().saturating_sub(1);
        self.kv_valid.extend_from_slice(&out.tokens[..kept]);
        Ok(out)
    }

    /// The strategy a generation uses when none is asked for, and why, in one sentence: the
    /// one the model was loaded with or a calibration chose, else the planner's (`auto`,
    /// `strategy/planner.rs`).
    pub fn default_strategy(&self) -> (Strategy, String) {
        self.planner.choose(&self.strategies, &self.shared)
    }

    /// [`GpuModel::default_strategy`]; for a constrained generation, the planner's choice among
    /// the strategies that follow constraints (every built-in one does).
    pub fn default_strategy_for(&self, constrained: bool) -> Strategy {
        self.default_strategy_with(constrained, false)
    }

    /// [`GpuModel::default_strategy_for`], also limited to the strategies that report
    /// log-probabilities when `logprobs` is asked.
    pub fn default_strategy_with(&self, constrained: bool, logprobs: bool) -> Strategy {
        if !constrained && !logprobs {
            return self.default_strategy().0;
        }
        self.planner
            .choose_among(&self.strategies, &self.shared, |s| {
                let s = self.strategies.get(s);
                (!constrained || s.constraints()) && (!logprobs || s.logprobs())
            })
            .0
    }

    /// Whether `strategy` can run this model here, from what is known without building
    /// anything (else the typed reason).
    pub fn check_strategy(&self, strategy: Strategy) -> Result<()> {
        self.strategies.get(strategy).check(&self.shared)
    }

    /// Makes `strategy` ready to run, building what it builds on first use (the megakernels
    /// copy the weights into an arena; the grid megakernel measures its workgroup count), else
    /// the typed reason. `Some(note)` when there is something worth reporting.
    pub async fn prepare_strategy(&mut self, strategy: Strategy) -> Result<Option<String>> {
        self.strategies
            .get_mut(strategy)
            .prepare(&self.shared)
            .await
    }

    /// Dispatches of one decode step of `strategy` (greedy or sampling).
    /// The megakernels' whole generation is one dispatch: 0 per step.
    pub fn dispatches_per_step(&self, strategy: Strategy, sampling: bool) -> Result<u32> {
        self.strategies
            .get(strategy)
            .dispatches_per_step(&self.shared, sampling)
    }

    /// The workgroups `strategy` dispatches where it decides them at run time, once prepared
    /// (the grid megakernel's count).
    pub fn strategy_workgroups(&self, strategy: Strategy) -> Option<u32> {
        self.strategies.get(strategy).workgroups()
    }

    /// Profiles one greedy decode step of `strategy` after `prompt` (+ a few generated
    /// tokens), each dispatch timed `reps` times (median). Only strategies with per-kernel
    /// steps (fused) can be profiled.
    pub async fn profile(
        &mut self,
        strategy: Strategy,
        prompt: &[u32],
        reps: u32,
    ) -> Result<StepProfile> {
        let request = GenerationRequest {
            prompt,
            max_tokens: 4,
            strategy,
            sampler: SamplingOptions::default().resolve(&[])?,
            chunk_tokens: 4,
            reuse_prefix: false,
            constraint: None,
            logprobs: None,
        };
        self.generate(&request, &mut |_| true).await?;
        let context = prompt.len() as u32 + 4;
        self.strategies
            .get(strategy)
            .profile(&self.shared, context, reps)
            .await
    }

    /// Where one prefill batch spends its time: `prompt` (at most the batch the model was
    /// loaded for) from position 0, every dispatch of the prefill body timed alone (`reps`
    /// times, median) and the whole body as one pass. The KV cache's first rows are
    /// overwritten, so the next generation prefills from scratch.
    pub async fn profile_prefill(&mut self, prompt: &[u32], reps: u32) -> Result<StepProfile> {
        let s = &self.shared;
        let n = prompt.len() as u32;
        if n == 0 || n > s.acts.max_batch {
            return Err(FuselmError::InvalidArgument(format!(
                "profile_prefill: {n} tokens; the model was loaded for batches of 1 to {}",
                s.acts.max_batch
            )));
        }
        s.check_tokens(prompt, 0)?;
        self.kv_valid.clear();
        s.ctx
            .queue
            .write_buffer(&s.acts.tokens, 0, bytemuck::cast_slice(prompt));
        s.write_state(0, n);
        let calls = s.prefill.roles(&s.weights, n);
        let body = |p: &mut wgpu::ComputePass<'_>| {
            let _ = s.prefill.record_body(p, n);
        };
        super::profile::profile_step(&s.ctx, &calls, body, n, reps).await
    }

    /// A registered strategy (the bench and calibration ask them about their policies).
    pub(crate) fn strategy(&self, strategy: Strategy) -> &dyn GenerationStrategy {
        self.strategies.get(strategy)
    }
}
