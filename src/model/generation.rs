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
//! Adding a strategy (the megakernel) means a variant here and a `generate_*` method.

use super::gpu_model::{GpuModel, StopReason};
use crate::clock::now_seconds;
use crate::error::{FuselmError, Result};
use crate::gpu::{GpuContext, StagedRead};
use crate::kernels::DecodeState;
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
}

impl Strategy {
    pub const ALL: [Strategy; 2] = [Strategy::Fused, Strategy::Unfused];

    pub fn name(self) -> &'static str {
        match self {
            Strategy::Fused => "fused",
            Strategy::Unfused => "unfused",
        }
    }

    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .into_iter()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                FuselmError::InvalidArgument(format!(
                    "strategy must be one of fused, unfused; got {s:?}"
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
    /// Fused: decode steps per compute pass (the host sees tokens at these boundaries).
    pub chunk_tokens: u32,
    /// Keep the KV-cache rows of the longest prefix this prompt shares with what the previous
    /// generation left in the cache, and prefill only the rest (multi-turn chat). Off: a fresh
    /// context, every prompt token prefilled.
    pub reuse_prefix: bool,
}

/// Default decode steps per fused chunk.
pub const DEFAULT_CHUNK_TOKENS: u32 = 32;

/// Steps of the first decode chunk; each next chunk doubles, up to `chunk_tokens`.
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
}

fn stop_hit(p: &SamplerParams, id: u32) -> bool {
    p.stop_ids[..(p.n_stop as usize).min(p.stop_ids.len())].contains(&id)
}

/// Clones an error kept from load time (FuselmError holds non-Clone sources).
fn replay(e: &FuselmError) -> FuselmError {
    match e {
        FuselmError::LimitExceeded {
            limit,
            needed,
            available,
        } => FuselmError::LimitExceeded {
            limit,
            needed: *needed,
            available: *available,
        },
        other => FuselmError::InvalidArgument(format!(
            "the fused strategy is unavailable for this model: {other}"
        )),
    }
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
        // The last prompt token is always run: its logits choose the first new token.
        let reuse = if req.reuse_prefix {
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
        let mut out = match req.strategy {
            Strategy::Fused => self.generate_fused(req, reuse, on_token).await?,
            Strategy::Unfused => self.generate_unfused(req, reuse, on_token).await?,
        };
        out.reused_prompt_tokens = reuse;
        // Rows written for sure: the prompt's, and every accepted token's but the last (its row
        // is written by the step after it, which ran only if the generation went on).
        self.kv_valid.extend_from_slice(req.prompt);
        let kept = out.tokens.len().saturating_sub(1);
        self.kv_valid.extend_from_slice(&out.tokens[..kept]);
        Ok(out)
    }

    /// The strategy a generation uses when none is asked for, and why, in one sentence: fused,
    /// unless its kernels cannot run this model or the adapter is a software (CPU)
    /// implementation — there a dispatch is cheap next to the work, and fused measured 0.4–0.6×
    /// unfused on SwiftShader (README, Performance). Issue 9's planner will measure instead.
    pub fn default_strategy(&self) -> (Strategy, String) {
        match self.fused_available() {
            Err(e) => (
                Strategy::Unfused,
                format!("unfused: the fused kernels cannot run this model here ({e})"),
            ),
            Ok(()) if self.ctx.identity.is_software => (
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

    /// Whether the fused strategy can run this model (else the typed reason).
    pub fn fused_available(&self) -> Result<()> {
        self.fused.as_ref().map(|_| ()).map_err(replay)
    }

    /// Dispatches of one decode step of `strategy` (greedy or sampling).
    pub fn dispatches_per_step(&self, strategy: Strategy, sampling: bool) -> Result<u32> {
        Ok(match strategy {
            Strategy::Unfused => self.decode.dispatches(),
            Strategy::Fused => {
                let f = self.fused.as_ref().map_err(replay)?;
                f.decode.body_dispatches() + f.choice.dispatches(sampling)
            }
        })
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
        let mut pending: VecDeque<(StagedRead, u32)> = VecDeque::new();

        // The last prompt batch and the first token: one pass.
        let mut enc = Self::encoder(ctx);
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            self.prefill.record_body(&mut pass, n - last)?;
            fused.choice.record(&mut pass, sampling);
        }
        let read = StagedRead::copy(
            &ctx.device,
            &mut enc,
            &self.acts.tokens,
            u64::from(n) * 4,
            4,
        );
        pending.push_back((read.submitted(ctx.queue.submit([enc.finish()])), 1));
        prog.out.submits += 1;
        prog.out.dispatches +=
            u64::from(self.prefill.dispatches() - 2 + fused.choice.dispatches(sampling));
        let mut recorded = 1u32; // tokens whose steps are recorded
        let chunk = req.chunk_tokens.max(1);
        // Chunks ramp up from FIRST_CHUNK steps: the host records the next chunk before it waits
        // for the first token, and recording a full chunk (~125 dispatches a step on SmolLM2)
        // took longer than the prompt's GPU work (TTFT ~13 ms natively, ~36 ms in wasm, at 32).
        let mut next_chunk = FIRST_CHUNK.min(chunk);
        let per_step =
            u64::from(fused.decode.body_dispatches() + fused.choice.dispatches(sampling));

        while let Some((read, count)) = pending.pop_front() {
            // Keep the GPU busy: queue the next chunk before waiting for this one.
            while pending.is_empty() && recorded < req.max_tokens {
                let steps = next_chunk.min(req.max_tokens - recorded);
                next_chunk = (next_chunk * 2).min(chunk);
                let mut enc = Self::encoder(ctx);
                {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    for i in 0..steps {
                        // The step producing token index recorded + i sees n + recorded + i keys.
                        fused.decode.record_body(&mut pass, n + recorded + i)?;
                        fused.choice.record(&mut pass, sampling);
                    }
                }
                let read = StagedRead::copy(
                    &ctx.device,
                    &mut enc,
                    &self.acts.tokens,
                    u64::from(n + recorded) * 4,
                    u64::from(steps) * 4,
                );
                pending.push_back((read.submitted(ctx.queue.submit([enc.finish()])), steps));
                prog.out.submits += 1;
                prog.out.dispatches += per_step * u64::from(steps);
                prog.out.decode_steps += u64::from(steps);
                recorded += steps;
            }
            let ids: Vec<u32> = bytemuck::pod_collect_to_vec(&read.read(&ctx.device).await?);
            for &id in ids.iter().take(count as usize) {
                if !prog.accept(id, p, req.max_tokens, on_token) {
                    return Ok(prog.finish());
                }
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
            let read = StagedRead::copy(&ctx.device, &mut enc, &self.acts.logits, 0, vocab_bytes);
            let read = read.submitted(ctx.queue.submit([enc.finish()]));
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
