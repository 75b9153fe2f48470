//! What a generation is asked and what it returns, shared by every strategy: the run a
//! strategy is given ([`Run`]), its result ([`TokenGeneration`]) and the bookkeeping every
//! strategy does as tokens reach the host ([`Progress`]). The strategies themselves are in
//! `model::strategy`.

use crate::clock::now_seconds;
use crate::constraint::TokenAutomaton;
use crate::error::{FuselmError, Result};
use crate::kernels::constraint::ConstraintTable;
use crate::sampling::logprobs::TokenLogprobs;
use crate::sampling::{SamplerParams, NONFINITE_ID};
use serde::{Deserialize, Serialize};

/// Default decode steps per fused chunk.
pub const DEFAULT_CHUNK_TOKENS: u32 = 32;

/// Why a generation ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub enum StopReason {
    /// The model produced an end-of-generation token (not included in the output).
    EndOfGeneration,
    /// `maxTokens` were generated.
    Length,
    /// The text reached one of the `stop` sequences (not included in the output).
    StopSequence,
    /// The caller stopped it.
    Aborted,
}

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
    /// Tokens a context shift dropped from the context to go on past `nCtx` (0: none).
    #[serde(default)]
    pub dropped_tokens: u32,
    /// Host seconds spent recording and submitting the decode steps (fused: the chunks after
    /// the first token). When it nears `decode_seconds`, decode is bound by the host's
    /// command recording, not by the GPU.
    pub record_seconds: f64,
    /// With `logprobs` asked: one entry per id handed to `on_token`, in order: one per id in
    /// `tokens`, and one more when `on_token` refused the last id (an abort or a stop sequence,
    /// whose caller may keep that id; `TextModel` keeps one entry per id it reports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logprobs: Vec<TokenLogprobs>,
}

/// What a strategy is asked to run: the tokens after `prompt`, whose KV rows `0..start` are
/// already in the strategy's KV cache (a prefix kept from the previous generation; the last
/// prompt token is always run). `prompt` is not empty and `max_tokens` is at least 1.
#[derive(Clone)]
pub(crate) struct Run<'a> {
    pub prompt: &'a [u32],
    pub max_tokens: u32,
    /// Resolved sampling settings, including the stop ids.
    pub sampler: SamplerParams,
    /// The caller's chunk setting (`GenerationRequest::chunk_tokens`); each strategy says what
    /// it means for it.
    pub chunk_tokens: u32,
    pub start: u32,
    /// The constraint the output must follow (the sampler's `constrained` is then set).
    pub constraint: Option<RunConstraint<'a>>,
    /// Asked between prefill batches; false stops the generation (`StopReason::Aborted`).
    pub keep_going: &'a dyn Fn() -> bool,
    /// Report each generated token's log-probability with this many alternatives (0..=20;
    /// `sampling::logprobs`); None: none.
    pub logprobs: Option<u32>,
}

/// One strategy run within a generation: its tokens, and how the constraint and the sampler
/// continue after a shift.
pub(crate) struct Segment<'a> {
    pub prompt: &'a [u32],
    pub max_tokens: u32,
    pub reuse_prefix: bool,
    /// XORed into the seed: positions repeat after a shift, the draws should not.
    pub seed_mix: u32,
    /// The constraint's state where the previous run left it (None: its start).
    pub constraint_state: Option<u32>,
}

/// A constraint as a strategy uses it: the automaton (the host's reference and the unfused
/// strategy's mask) and its uploaded table (the GPU's).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunConstraint<'a> {
    pub automaton: &'a TokenAutomaton,
    pub table: &'a ConstraintTable,
    /// The state the run starts in: the automaton's start, or where a generation cut by a
    /// context shift left it.
    pub start: u32,
}

fn stop_hit(p: &SamplerParams, id: u32) -> bool {
    p.stop_ids[..(p.n_stop as usize).min(p.stop_ids.len())].contains(&id)
}

/// A generation's result as its tokens reach the host, with its clock; with a constraint, the
/// host follows its state and checks every id the GPU chose against the CPU reference.
pub(crate) struct Progress<'a> {
    pub out: TokenGeneration,
    start: f64,
    decode_start: f64,
    /// The constraint and its state after the ids accepted so far.
    constraint: Option<(&'a TokenAutomaton, u32)>,
    /// An id the constraint did not allow (the generation then fails).
    violation: Option<u32>,
    /// Prompt tokens (where the generated ones start in the sequence).
    prompt_len: u32,
    /// The position whose logits were not finite (the generation then fails).
    non_finite: Option<u32>,
}

impl<'a> Progress<'a> {
    /// The bookkeeping of `run` (its constraint followed from its start state).
    pub fn of(run: &Run<'a>) -> Self {
        let mut p = Self::new();
        p.constraint = run.constraint.map(|c| (c.automaton, c.start));
        p.prompt_len = run.prompt.len() as u32;
        p
    }

    pub fn new() -> Self {
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
                dropped_tokens: 0,
                record_seconds: 0.0,
                logprobs: Vec::new(),
            },
            start,
            decode_start: start,
            constraint: None,
            violation: None,
            prompt_len: 0,
            non_finite: None,
        }
    }

    /// The constraint's state after the ids accepted so far (None: unconstrained).
    pub fn constraint_state(&self) -> Option<u32> {
        self.constraint.map(|(_, s)| s)
    }

    /// Takes one generated id ([`NONFINITE_ID`]: the step's logits were not finite); returns
    /// false when the generation is over.
    pub fn accept(
        &mut self,
        id: u32,
        p: &SamplerParams,
        max_tokens: u32,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> bool {
        self.accept_with(id, None, p, max_tokens, on_token)
    }

    /// [`Progress::accept`] with the id's log-probabilities (kept when the id reaches
    /// `on_token`).
    pub fn accept_with(
        &mut self,
        id: u32,
        logprob: Option<TokenLogprobs>,
        p: &SamplerParams,
        max_tokens: u32,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> bool {
        if self.out.tokens.is_empty() && self.out.prefill_seconds == 0.0 {
            self.decode_start = now_seconds();
            self.out.prefill_seconds = self.decode_start - self.start;
        }
        if id == NONFINITE_ID {
            self.non_finite = Some(self.prompt_len + self.out.tokens.len() as u32);
            return false;
        }
        if let Some((a, state)) = &mut self.constraint {
            if !a.allowed(*state, id) {
                self.violation = Some(id);
                return false;
            }
            *state = a.advance(*state, id);
        }
        if stop_hit(p, id) {
            self.out.stop_reason = StopReason::EndOfGeneration;
            self.out.stop_token = Some(id);
            return false;
        }
        if let Some(l) = logprob {
            self.out.logprobs.push(l);
        }
        if !on_token(id) {
            self.out.stop_reason = StopReason::Aborted;
            return false;
        }
        self.out.tokens.push(id);
        (self.out.tokens.len() as u32) < max_tokens
    }

    /// The generation was stopped before its first token (`Run::keep_going`).
    pub fn aborted(mut self) -> Result<TokenGeneration> {
        self.out.stop_reason = StopReason::Aborted;
        self.finish()
    }

    pub fn finish(mut self) -> Result<TokenGeneration> {
        if let Some(position) = self.non_finite {
            return Err(FuselmError::Numerical {
                position,
                generated: self.out.tokens.len() as u32,
            });
        }
        if let Some(id) = self.violation {
            return Err(FuselmError::Gpu(format!(
                "token {id} (after {} generated) is not allowed by the constraint: the GPU's \
                 choice differs from the CPU reference",
                self.out.tokens.len()
            )));
        }
        self.out.decode_seconds = now_seconds() - self.decode_start;
        Ok(self.out)
    }
}
