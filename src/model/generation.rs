//! Generation strategies: how the steps of a generation are recorded, submitted and read.
//!
//! * [`Strategy::Unfused`] — the baseline a straightforward WebGPU pipeline is: one dispatch
//!   per operation (~15 per layer), one submit per token, the logits read back and the token
//!   sampled on the host (`sampling::reference`, the same arithmetic as the GPU sampler). It
//!   keeps the KV cache and uses the same prefill, so against `fused` it measures dispatch and
//!   round-trip overhead, never recomputation.
//! * [`Strategy::Fused`] — 4 dispatches per layer, the token chosen on the GPU and fed to the
//!   next step's embedding on the GPU, a whole chunk of steps in one compute pass; the host
//!   only reads tokens at chunk boundaries, while the next chunk is already queued. A stop id
//!   sets `state.done` on the GPU and the rest of the recorded steps do nothing.
//!
//! * [`Strategy::Megakernel`] — the whole generation (prompt ingestion and every decode step,
//!   the token chosen by the same GPU sampler) in one dispatch of one workgroup that loops in
//!   the shader (`model::megakernel`). With `chunk_tokens` below `max_tokens` it runs as one
//!   dispatch per chunk, so the host sees tokens at chunk boundaries (and a browser's GPU
//!   watchdog never sees one long dispatch).
//!
//! Adding a strategy means a variant here and a `generate_*` method.

use super::chunk_ramp::ChunkRamp;
use super::gpu_model::{GpuModel, StopReason};
use super::megakernel::MegaModel;
use crate::clock::now_seconds;
use crate::error::{FuselmError, Result};
use crate::gpu::{GpuContext, StagedRead};
use crate::kernels::megakernel::MegaParams;
use crate::kernels::{DecodeState, PassState};
use crate::sampling::{reference, SamplerParams};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// How a generation is run on the GPU. Every strategy gives the same tokens for the same
/// settings (greedy and seeded sampling).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub enum Strategy {
    /// Fused kernels (4 dispatches per layer), sampling on the GPU, a whole chunk of tokens
    /// per compute pass. The default.
    #[default]
    Fused,
    /// The baseline: one dispatch per operation, one submit and one logits readback per token,
    /// sampling on the host.
    Unfused,
    /// The whole generation in one dispatch of one workgroup (llama-family models): no
    /// dispatch or round-trip cost at all, but one workgroup's share of the GPU, so it wins
    /// only on small models.
    Megakernel,
    /// Experimental, opt-in, native only: the megakernel over as many persistent workgroups
    /// as the adapter keeps resident, meeting at grid barriers on storage atomics. WebGPU
    /// promises neither the memory ordering nor the co-residency this needs, so it runs only
    /// where wgpu offers coherent storage (Vulkan, Metal, DX12), with a measured workgroup
    /// count and bounded spins (a typed error instead of a hang). Never chosen by `auto`.
    MegakernelGrid,
}

impl Strategy {
    /// Every strategy; `auto` and calibration choose among the first three.
    pub const ALL: [Strategy; 4] = [
        Strategy::Fused,
        Strategy::Unfused,
        Strategy::Megakernel,
        Strategy::MegakernelGrid,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Fused => "fused",
            Strategy::Unfused => "unfused",
            Strategy::Megakernel => "megakernel",
            Strategy::MegakernelGrid => "megakernel-grid",
        }
    }

    /// Whether the strategy runs in one of the megakernel's dispatches (its own KV cache).
    pub fn is_megakernel(self) -> bool {
        matches!(self, Strategy::Megakernel | Strategy::MegakernelGrid)
    }

    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                FuselmError::InvalidArgument(format!(
                    "strategy must be one of fused, unfused, megakernel, megakernel-grid; got \
                     {s:?}"
                ))
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
}

/// The planner picks the megakernel on a GPU while one token streams at most this many
/// weight bytes (see [`GpuModel::default_strategy`]). Natively (wgpu on Vulkan, H200), since
/// the megakernel's subgroup reductions and parallel heads (2026-11-25), it beats fused end to
/// end at d32 L1 to d64 L4 (28–313 KB; 1.05–1.14× at 313 KB) and loses d128 L1 (332 KB, 0.63–0.64×)
/// — bench/results/megakernel-heads-h200-2026-11-25. Before them the crossover lay near 92 KB
/// (megakernel-h200-2026-11-24-548148e, planner-h200-2026-11-24-20b7b8c).
#[cfg(not(target_arch = "wasm32"))]
pub const MEGAKERNEL_GPU_MAX_WEIGHT_BYTES: u64 = 320 * 1024;
/// In the browser (the npm package on Dawn, H200) a dispatch costs more and the megakernel
/// wins further, but where varies between leases: d64 L4 (313 KB) 1.7–1.8× fused in both
/// measured, d128 L1 (332 KB) 1.4× and 0.99×, d128 L4 (1.22 MB) 1.05× and 0.55×, d256 L1
/// (1.25 MB) 0.65× and 0.62× (bench/results/megakernel-dawn-h200-2026-11-24-142921c,
/// planner-h200-2026-11-24-20b7b8c). 512 KiB keeps the worst miss of either lease at ≤ 1.05×;
/// `calibrate` measures the device at hand instead.
#[cfg(target_arch = "wasm32")]
pub const MEGAKERNEL_GPU_MAX_WEIGHT_BYTES: u64 = 512 * 1024;
/// In the browser when the adapter's subgroups are 32 wide (`GpuContext::subgroups32`), the fused
/// kernels and the megakernel reduce with subgroup operations (the 512 KiB above was measured
/// before the package could use them). Through Dawn on the H200 with subgroups, the megakernel
/// of 2026-11-25 (subgroup reductions of its own) won d32 L1/L4, d64 L1 and d64 L4 (28–313 KB;
/// 2.7×, 2.5×, 2.2×, 1.39× fused end to end) and lost d128 L1 (332 KB, 0.72×) and every larger
/// size (bench/results/megakernel-dawn-h200-2026-11-25). Before its own subgroup reductions it
/// had lost d64 L4 (0.84×; dawn-subgroups-h200-2026-11-25/lease2), and they made it 1.3–1.5×
/// faster there natively.
pub const MEGAKERNEL_BROWSER_SUBGROUPS_MAX_WEIGHT_BYTES: u64 = 320 * 1024;
/// The same on a software (CPU) adapter.
pub const MEGAKERNEL_SOFTWARE_MAX_WEIGHT_BYTES: u64 = 8 * 1024 * 1024;

/// Default decode steps per fused chunk.
pub const DEFAULT_CHUNK_TOKENS: u32 = 32;

/// Steps of the first decode chunk; later ones grow while the GPU is the bound (`ChunkRamp`),
/// up to `chunk_tokens`.
const FIRST_CHUNK: u32 = 4;

/// The result of a generation, in token ids, with what it cost.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TokenGeneration {
    /// Generated ids (a stop id is not included).
    pub tokens: Vec<u32>,
    pub stop_reason: StopReason,
    /// The stop id that ended the generation, if one did.
    pub stop_token: Option<u32>,
    /// Seconds from submitting the prompt to having the first generated token on the host.
    pub prefill_seconds: f64,
    /// Seconds spent on the remaining tokens.
    pub decode_seconds: f64,
    /// Compute dispatches recorded (prefill included).
    pub dispatches: u64,
    /// Queue submissions (prefill included).
    pub submits: u64,
    /// Decode steps the GPU ran (fused: recorded steps, including no-ops after a stop).
    pub decode_steps: u64,
    /// Prompt tokens whose KV rows were kept from the previous generation (`reuse_prefix`).
    pub reused_prompt_tokens: u32,
    /// Host seconds spent recording and submitting the decode steps (fused: the chunks after
    /// the first token). When it nears `decode_seconds`, decode is bound by the host's
    /// command recording, not by the GPU.
    pub record_seconds: f64,
}

fn stop_hit(p: &SamplerParams, id: u32) -> bool {
    p.stop_ids[..(p.n_stop as usize).min(p.stop_ids.len())].contains(&id)
}

/// Clones a limit error kept from load time (FuselmError holds non-Clone sources); `None` for
/// other kinds.
fn replay_limit(e: &FuselmError) -> Option<FuselmError> {
    match e {
        FuselmError::LimitExceeded {
            limit,
            needed,
            available,
        } => Some(FuselmError::LimitExceeded {
            limit,
            needed: *needed,
            available: *available,
        }),
        _ => None,
    }
}

/// Clones the fused strategy's load-time error.
fn replay(e: &FuselmError) -> FuselmError {
    replay_limit(e).unwrap_or_else(|| {
        FuselmError::InvalidArgument(format!(
            "the fused strategy is unavailable for this model: {e}"
        ))
    })
}

/// [`replay`] for the megakernel's load-time error.
pub(super) fn replay_mega(e: &FuselmError) -> FuselmError {
    replay_limit(e).unwrap_or_else(|| match e {
        FuselmError::UnsupportedModel(m) => FuselmError::UnsupportedModel(m.clone()),
        other => FuselmError::Gpu(format!("the megakernel is unavailable: {other}")),
    })
}

struct Progress {
    out: TokenGeneration,
    start: f64,
    decode_start: f64,
}

impl Progress {
    fn new() -> Self {
        let start = now_seconds();
        Self {
            out: TokenGeneration {
                tokens: Vec::new(),
                stop_reason: StopReason::Length,
                stop_token: None,
                prefill_seconds: 0.0,
                decode_seconds: 0.0,
                dispatches: 0,
                submits: 0,
                decode_steps: 0,
                reused_prompt_tokens: 0,
                record_seconds: 0.0,
            },
            start,
            decode_start: start,
        }
    }

    /// Takes one generated id; returns false when the generation is over.
    fn accept(
        &mut self,
        id: u32,
        p: &SamplerParams,
        max_tokens: u32,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> bool {
        if self.out.tokens.is_empty() && self.out.prefill_seconds == 0.0 {
            self.decode_start = now_seconds();
            self.out.prefill_seconds = self.decode_start - self.start;
        }
        if stop_hit(p, id) {
            self.out.stop_reason = StopReason::EndOfGeneration;
            self.out.stop_token = Some(id);
            return false;
        }
        if !on_token(id) {
            self.out.stop_reason = StopReason::Aborted;
            return false;
        }
        self.out.tokens.push(id);
        (self.out.tokens.len() as u32) < max_tokens
    }

    fn finish(mut self) -> TokenGeneration {
        self.out.decode_seconds = now_seconds() - self.decode_start;
        self.out
    }
}

impl GpuModel {
    /// Generates up to `req.max_tokens` tokens after `req.prompt` (a fresh context: the KV
    /// cache is reset). `on_token(id)` sees each token as the host receives it and returns
    /// false to abort; a stop id ends the generation and is not included.
    pub async fn generate(
        &mut self,
        req: &GenerationRequest<'_>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<TokenGeneration> {
        self.check_tokens(req.prompt, req.max_tokens)?;
        if req.prompt.is_empty() {
            return Err(FuselmError::InvalidArgument(
                "the prompt must hold at least one token".into(),
            ));
        }
        if req.max_tokens == 0 {
            return Ok(Progress::new().finish());
        }
        // The last prompt token is always run: its logits choose the first new token. The
        // megakernel keeps its own KV cache: a prefix is reusable only from the same cache.
        let mega = req.strategy.is_megakernel();
        let reuse = if req.reuse_prefix && self.kv_in_mega == mega {
            let shared = self
                .kv_valid
                .iter()
                .zip(req.prompt)
                .take_while(|(a, b)| a == b)
                .count();
            shared.min(req.prompt.len() - 1) as u32
        } else {
            0
        };
        // Until this generation ends well, the cache holds nothing reusable.
        self.kv_valid.clear();
        self.kv_in_mega = mega;
        let mut out = match req.strategy {
            Strategy::Fused => self.generate_fused(req, reuse, on_token).await?,
            Strategy::Unfused => self.generate_unfused(req, reuse, on_token).await?,
            Strategy::Megakernel => {
                self.generate_megakernel(req, reuse, on_token, false)
                    .await?
            }
            Strategy::MegakernelGrid => {
                self.generate_megakernel(req, reuse, on_token, true).await?
            }
        };
        out.reused_prompt_tokens = reuse;
        // Rows written for sure: the prompt's, and every accepted token's but the last (its row
        // is written by the step after it, which ran only if the generation went on).
        self.kv_valid.extend_from_slice(req.prompt);
        let kept = out.tokens.len().saturating_sub(1);
        self.kv_valid.extend_from_slice(&out.tokens[..kept]);
        Ok(out)
    }

    /// The planner (`auto`): the strategy a generation uses when none is asked for, and why,
    /// in one sentence, from the model's shape and the adapter. Crossovers measured with
    /// `fuselm bench --toy` (bench/results/megakernel-h200-2026-11-24-548148e, end-to-end
    /// tok/s of 64-token generations):
    /// * the one-workgroup megakernel (llama-family blocks) beats fused on a GPU while a
    ///   token streams at most [`MEGAKERNEL_GPU_MAX_WEIGHT_BYTES`] of weights (natively on
    ///   the H200 since 2026-11-25: 1.7–2.8× at 28–92 KB, 1.05–1.14× at 313 KB, 0.63–0.64× at
    ///   332 KB, 0.02× on SmolLM2's 98 MB; through Dawn, as in a browser, without subgroups: 1.7–3.7× up to
    ///   313 KB, 0.99–1.4× at 332 KB, 0.55–1.05× at 1.2 MB, 0.62–0.65× at 1.25 MB; with
    ///   32-wide subgroups up to [`MEGAKERNEL_BROWSER_SUBGROUPS_MAX_WEIGHT_BYTES`]: 1.4–2.7× at
    ///   28–313 KB, 0.72× at 332 KB), and beats unfused on a
    ///   software adapter up to [`MEGAKERNEL_SOFTWARE_MAX_WEIGHT_BYTES`] (lavapipe, 2 cores:
    ///   1.3–2.2× from 28 KB to 4.8 MB; 0.5× on SmolLM2), where its one workgroup runs on one
    ///   CPU thread;
    /// * otherwise fused on GPUs and unfused on software adapters (a dispatch costs little
    ///   there next to the work: fused measured 0.8–1.2× unfused on lavapipe's toy grid and
    ///   0.4–0.6× on SwiftShader).
    ///
    /// A calibration ([`GpuModel::calibrate`], [`GpuModel::use_calibration`]) replaces this rule
    /// with what was measured on this device.
    pub fn default_strategy(&self) -> (Strategy, String) {
        if let Some((strategy, reason)) = &self.calibrated {
            return (*strategy, reason.clone());
        }
        let software = self.ctx.identity.is_software;
        let bytes = self.decode_weight_bytes();
        let mega_limit = self.megakernel_limit();
        let mega_runs = super::megakernel::mega_shape(&self.config, self.acts.n_ctx).is_ok()
            && !matches!(self.mega, Some(Err(_)));
        if mega_runs && bytes <= mega_limit {
            return (
                Strategy::Megakernel,
                format!(
                    "megakernel: a token streams only {} KB of weights (at most {} KB), so one \
                     dispatch for the whole generation beats {} here",
                    bytes / 1000,
                    mega_limit / 1000,
                    if software {
                        "one dispatch per operation"
                    } else {
                        "4 dispatches per layer"
                    }
                ),
            );
        }
        match self.fused_available() {
            Err(e) => (
                Strategy::Unfused,
                format!("unfused: the fused kernels cannot run this model here ({e})"),
            ),
            Ok(()) if software => (
                Strategy::Unfused,
                "unfused: this is a software (CPU) adapter, where a dispatch costs little next to \
                 the work and the fused kernels' extra per-workgroup work makes them slower"
                    .into(),
            ),
            Ok(()) => (
                Strategy::Fused,
                "fused: 4 dispatches per layer with sampling on the GPU, instead of one dispatch \
                 per operation and a readback per token"
                    .into(),
            ),
        }
    }

    /// The most weight bytes per token for which the planner picks the megakernel here.
    pub(super) fn megakernel_limit(&self) -> u64 {
        if self.ctx.identity.is_software {
            MEGAKERNEL_SOFTWARE_MAX_WEIGHT_BYTES
        } else if cfg!(target_arch = "wasm32") && self.ctx.subgroups32() {
            MEGAKERNEL_BROWSER_SUBGROUPS_MAX_WEIGHT_BYTES
        } else {
            MEGAKERNEL_GPU_MAX_WEIGHT_BYTES
        }
    }

    /// Whether the fused strategy can run this model (else the typed reason).
    pub fn fused_available(&self) -> Result<()> {
        self.fused.as_ref().map(|_| ()).map_err(replay)
    }

    /// Dispatches of one decode step of `strategy` (greedy or sampling).
    /// The megakernel's whole generation is one dispatch: 0 per step.
    pub fn dispatches_per_step(&self, strategy: Strategy, sampling: bool) -> Result<u32> {
        Ok(match strategy {
            Strategy::Megakernel | Strategy::MegakernelGrid => 0,
            Strategy::Unfused => self.decode.dispatches(),
            Strategy::Fused => {
                let f = self.fused.as_ref().map_err(replay)?;
                f.decode.body_dispatches() + f.choice.dispatches(sampling)
            }
        })
    }

    /// Whether the megakernel can run this model (else the typed reason). Builds it on first
    /// call: compiles the kernel and copies the weights into its arena.
    pub async fn megakernel_available(&mut self) -> Result<()> {
        if self.mega.is_none() {
            let built = MegaModel::build(
                &self.ctx,
                &self.config,
                &self.weights,
                &self.acts,
                &self.sampler,
            )
            .await;
            self.mega = Some(built);
        }
        match &self.mega {
            Some(Ok(_)) => Ok(()),
            Some(Err(e)) => Err(replay_mega(e)),
            None => unreachable!("built above"),
        }
    }

    /// Builds the grid megakernel (strategy `megakernel-grid`) if needed and returns its
    /// workgroup count: the one set with [`GpuModel::set_grid_workgroups`], else what the
    /// occupancy discovery measured on this adapter (once per model) — except on a software
    /// adapter, where it is 1: there workgroups are CPU threads, and lavapipe's per-invocation
    /// loop cap (~65k back-edges) ends a spin that waits for a busy thread, so a grid barrier
    /// across threads times out (the typed error) instead of waiting.
    pub async fn megakernel_grid_ready(&mut self) -> Result<u32> {
        self.megakernel_available().await?;
        let Some(Ok(mega)) = &mut self.mega else {
            unreachable!("megakernel_available succeeded")
        };
        crate::kernels::megakernel::check_grid(&self.ctx, &mega.shape, 1)?;
        let software = self.ctx.identity.is_software;
        let workgroups = match (self.grid_workgroups, self.grid_discovered) {
            (Some(n), _) => n,
            (None, _) if software => 1,
            (None, Some(n)) => n,
            (None, None) => {
                let n = mega
                    .discover_workgroups(&self.ctx, &self.acts, &self.sampler)
                    .await?;
                self.grid_discovered = Some(n);
                n
            }
        };
        mega.grid_call(&self.ctx, &self.acts, &self.sampler, workgroups)
            .await?;
        Ok(workgroups)
    }

    /// The grid megakernel's workgroup count: `Some(n)` fixes it, `None` (the default) uses
    /// the occupancy discovery's count.
    pub fn set_grid_workgroups(&mut self, workgroups: Option<u32>) {
        self.grid_workgroups = workgroups;
    }

    /// The grid megakernel's workgroup count, once built.
    pub fn grid_workgroups_used(&self) -> Option<u32> {
        match &self.mega {
            Some(Ok(m)) => m.built_grid().map(|(n, _)| n),
            _ => None,
        }
    }

    /// The workgroups the occupancy discovery found resident at once, once measured.
    pub fn grid_discovered(&self) -> Option<u32> {
        self.grid_discovered
    }

    /// Writes the sampler settings and the penalty counts of the prompt's window.
    fn write_sampler(&self, p: &SamplerParams, prompt: &[u32]) {
        let q = &self.ctx.queue;
        q.write_buffer(&self.sampler.params, 0, bytemuck::bytes_of(p));
        if p.penalties_on != 0 {
            let counts = reference::window_counts(prompt, prompt.len(), p.penalty_last_n);
            let mut dense = vec![0u32; self.config.vocab_size as usize];
            for (id, c) in counts {
                if let Some(slot) = dense.get_mut(id as usize) {
                    *slot = c;
                }
            }
            q.write_buffer(&self.sampler.counts, 0, bytemuck::cast_slice(&dense));
        }
    }

    fn encoder(ctx: &GpuContext) -> wgpu::CommandEncoder {
        ctx.device.create_command_encoder(&Default::default())
    }

    async fn generate_fused(
        &mut self,
        req: &GenerationRequest<'_>,
        reuse: u32,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<TokenGeneration> {
        let fused = self.fused.as_ref().map_err(replay)?;
        let p = &req.sampler;
        let sampling = !p.greedy();
        let n = req.prompt.len() as u32;
        let mut prog = Progress::new();
        self.write_sampler(p, req.prompt);
        let last = self.prefill_all_but_last(req.prompt, reuse)?;
        prog.out.submits += u64::from((last - reuse).div_ceil(self.acts.max_batch.max(1)));
        prog.out.dispatches += u64::from(self.prefill.dispatches()) * prog.out.submits;
        let ctx = &self.ctx;
        // (the read, its tokens, whether it is a decode chunk rather than the prompt's pass)
        let mut pending: VecDeque<(StagedRead, u32, bool)> = VecDeque::new();

        // The last prompt batch and the first token: one pass.
        let mut enc = Self::encoder(ctx);
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            self.prefill.record_body(&mut pass, n - last)?;
            fused.choice.record(&mut pass, sampling);
        }
        let read = StagedRead::copy_pooled(
            &ctx.device,
            &self.staging,
            &mut enc,
            &self.acts.tokens,
            u64::from(n) * 4,
            4,
        );
        pending.push_back((read.submitted(ctx.queue.submit([enc.finish()])), 1, false));
        prog.out.submits += 1;
        prog.out.dispatches +=
            u64::from(self.prefill.dispatches() - 2 + fused.choice.dispatches(sampling));
        // Tokens whose steps are recorded.
        let mut recorded = 1u32;
        // Chunks start at FIRST_CHUNK steps: the host records the next chunk before it waits for
        // the first token, and recording a full chunk (~125 dispatches a step on SmolLM2) took
        // longer than the prompt's GPU work (TTFT ~13 ms natively, ~36 ms in wasm, at 32). They
        // grow only while the GPU is the bound (`ChunkRamp`).
        let mut ramp = ChunkRamp::new(FIRST_CHUNK, req.chunk_tokens);
        let per_step =
            u64::from(fused.decode.body_dispatches() + fused.choice.dispatches(sampling));

        while let Some((read, count, decode)) = pending.pop_front() {
            // Keep the GPU busy: queue the next chunk before waiting for this one.
            while pending.is_empty() && recorded < req.max_tokens {
                let steps = ramp.next_steps().min(req.max_tokens - recorded);
                let record_start = now_seconds();
                let mut enc = Self::encoder(ctx);
                {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    let mut set = PassState::default();
                    for i in 0..steps {
                        // The step producing token index recorded + i sees n + recorded + i keys.
                        fused
                            .decode
                            .record_body(&mut pass, &mut set, n + recorded + i)?;
                        fused.choice.record(&mut pass, sampling);
                        set.touched(0);
                    }
                }
                let read = StagedRead::copy_pooled(
                    &ctx.device,
                    &self.staging,
                    &mut enc,
                    &self.acts.tokens,
                    u64::from(n + recorded) * 4,
                    u64::from(steps) * 4,
                );
                pending.push_back((
                    read.submitted(ctx.queue.submit([enc.finish()])),
                    steps,
                    true,
                ));
                let record = now_seconds() - record_start;
                ramp.recorded(steps, record);
                prog.out.record_seconds += record;
                prog.out.submits += 1;
                prog.out.dispatches += per_step * u64::from(steps);
                prog.out.decode_steps += u64::from(steps);
                recorded += steps;
            }
            let wait_start = now_seconds();
            let ids: Vec<u32> = bytemuck::pod_collect_to_vec(&read.read(&ctx.device).await?);
            if decode {
                ramp.waited(count, now_seconds() - wait_start);
            }
            for &id in ids.iter().take(count as usize) {
                if !prog.accept(id, p, req.max_tokens, on_token) {
                    return Ok(prog.finish());
                }
            }
        }
        Ok(prog.finish())
    }

    async fn generate_megakernel(
        &mut self,
        req: &GenerationRequest<'_>,
        reuse: u32,
        on_token: &mut dyn FnMut(u32) -> bool,
        grid: bool,
    ) -> Result<TokenGeneration> {
        let workgroups = if grid {
            self.megakernel_grid_ready().await?
        } else {
            self.megakernel_available().await?;
            1
        };
        let Some(Ok(mega)) = &self.mega else {
            unreachable!("megakernel_available succeeded")
        };
        let call = match (grid, mega.built_grid()) {
            (false, _) => &mega.call,
            (true, Some((_, call))) => call,
            (true, None) => {
                return Err(FuselmError::Gpu("the grid megakernel is not built".into()))
            }
        };
        let p = &req.sampler;
        let n = req.prompt.len() as u32;
        let mut prog = Progress::new();
        self.write_sampler(p, req.prompt);
        let ctx = &self.ctx;
        ctx.queue
            .write_buffer(&self.acts.tokens, 0, bytemuck::cast_slice(req.prompt));
        ctx.queue.write_buffer(
            &self.acts.state,
            0,
            bytemuck::bytes_of(&DecodeState::new(reuse, 1)),
        );
        let steps = req.chunk_tokens.clamp(1, req.max_tokens);
        let params = MegaParams {
            n_prompt: n,
            end: n + req.max_tokens - 1,
            steps,
            n_lists: mega.shape.n_lists(),
        };
        ctx.queue
            .write_buffer(&mega.params, 0, bytemuck::bytes_of(&params));
        // Each submission: one dispatch, then copies of `state` and of every generated slot.
        // A dispatch can end before its `steps` (an adapter's loop limiter: see
        // megakernel.wgsl), so progress is read from `state`, and dispatches are recorded
        // until it says the generation is over; a surplus dispatch does nothing.
        let slots = u64::from(req.max_tokens) * 4;
        let mut pending: VecDeque<(StagedRead, StagedRead)> = VecDeque::new();
        let mut accepted = 0usize;
        let mut finished = false;
        let mut expected = 0u32; // tokens the recorded dispatches would make without a cap
        let mut last_pos = reuse;
        while !finished {
            // Keep the GPU busy: queue the next dispatch before waiting for this one.
            while pending.len() < 2 && (expected < req.max_tokens || pending.is_empty()) {
                let mut enc = Self::encoder(ctx);
                if grid {
                    enc.clear_buffer(&mega.gsync, 0, None);
                }
                {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    call.record(&mut pass, 1);
                }
                let state = StagedRead::copy(&ctx.device, &mut enc, &self.acts.state, 0, 16);
                let ids = StagedRead::copy(
                    &ctx.device,
                    &mut enc,
                    &self.acts.tokens,
                    u64::from(n) * 4,
                    slots,
                );
                let index = ctx.queue.submit([enc.finish()]);
                pending.push_back((state.submitted(index.clone()), ids.submitted(index)));
                prog.out.submits += 1;
                prog.out.dispatches += 1;
                expected = expected.saturating_add(steps);
            }
            let Some((state, ids)) = pending.pop_front() else {
                break;
            };
            let st: DecodeState = bytemuck::pod_read_unaligned(&state.read(&ctx.device).await?);
            let ids: Vec<u32> = bytemuck::pod_collect_to_vec(&ids.read(&ctx.device).await?);
            // Tokens chosen so far: positions n - 1 .. st.pos - 1 chose tokens n .. st.pos.
            let made = (st.pos + 1).saturating_sub(n).min(req.max_tokens) as usize;
            prog.out.decode_steps = made.saturating_sub(1) as u64;
            for &id in &ids[accepted..made] {
                accepted += 1;
                if !prog.accept(id, p, req.max_tokens, on_token) {
                    return Ok(prog.finish());
                }
            }
            finished = made == req.max_tokens as usize || st.done != 0;
            if !finished && st._pad == 2 {
                return Err(FuselmError::Gpu(format!(
                    "a grid barrier of the grid megakernel timed out at position {}: this \
                     adapter did not keep {workgroups} workgroups running at once; use fewer \
                     (grid workgroups) or the megakernel strategy",
                    st.pos
                )));
            }
            if !finished && st.pos == last_pos {
                return Err(FuselmError::Gpu(if st._pad == 1 {
                    format!(
                        "the adapter ended a megakernel dispatch before it finished one \
                         position (at {}): its per-invocation loop limit (lavapipe's) is below \
                         one decode step of this model; use the fused strategy",
                        st.pos
                    )
                } else {
                    format!(
                        "a megakernel dispatch made no progress (position {}, done {}, flag \
                         {})",
                        st.pos, st.done, st._pad
                    )
                }));
            }
            last_pos = st.pos;
            if !finished && pending.is_empty() {
                expected = made as u32; // it stopped early: record more
            }
        }
        Ok(prog.finish())
    }

    async fn generate_unfused(
        &mut self,
        req: &GenerationRequest<'_>,
        reuse: u32,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<TokenGeneration> {
        let p = &req.sampler;
        let n = req.prompt.len() as u32;
        let mut prog = Progress::new();
        let mut sequence = req.prompt.to_vec();
        let last = self.prefill_all_but_last(req.prompt, reuse)?;
        prog.out.submits += u64::from((last - reuse).div_ceil(self.acts.max_batch.max(1)));
        prog.out.dispatches += u64::from(self.prefill.dispatches()) * prog.out.submits;
        let vocab_bytes = u64::from(self.config.vocab_size) * 4;
        for i in 0..req.max_tokens {
            let ctx = &self.ctx;
            let record_start = now_seconds();
            if i > 0 {
                // The token chosen on the host goes back to the GPU: id and position.
                let pos = n + i - 1;
                ctx.queue.write_buffer(
                    &self.acts.tokens,
                    u64::from(pos) * 4,
                    bytemuck::bytes_of(&sequence[pos as usize]),
                );
                ctx.queue.write_buffer(
                    &self.acts.state,
                    0,
                    bytemuck::bytes_of(&DecodeState::new(pos, 1)),
                );
            }
            let mut enc = Self::encoder(ctx);
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                if i == 0 {
                    self.prefill.record(&mut pass, n - last)?;
                } else {
                    self.decode.record(&mut pass, 1)?;
                }
            }
            // One staging buffer reused across tokens, as any careful pipeline would.
            let read = StagedRead::copy_pooled(
                &ctx.device,
                &self.staging,
                &mut enc,
                &self.acts.logits,
                0,
                vocab_bytes,
            );
            let read = read.submitted(ctx.queue.submit([enc.finish()]));
            if i > 0 {
                prog.out.record_seconds += now_seconds() - record_start;
            }
            prog.out.submits += 1;
            prog.out.dispatches += u64::from(if i == 0 {
                self.prefill.dispatches()
            } else {
                self.decode.dispatches()
            });
            prog.out.decode_steps += u64::from(i > 0);
            let logits: Vec<f32> = bytemuck::pod_collect_to_vec(&read.read(&ctx.device).await?);
            let position = n + i;
            let counts = reference::window_counts(&sequence, position as usize, p.penalty_last_n);
            let id = reference::sample(&logits, &counts, p, position);
            sequence.push(id);
            if !prog.accept(id, p, req.max_tokens, on_token) {
                break;
            }
        }
        Ok(prog.finish())
    }
}
