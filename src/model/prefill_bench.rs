//! Prompt ingestion: time to first token and prefill tokens per second at given prompt lengths,
//! and where one prefill batch's time goes per kernel role (`fuselm prefill-bench`; on the GPU
//! machine through `bench/gpu cli`). The prompts are `bench`'s synthetic ones.

use super::bench::{prompt_of, Spread};
use super::gpu_model::{GenerationRequest, GpuModel};
use super::profile::StepProfile;
use super::strategy::Strategy;
use crate::clock::now_seconds;
use crate::error::Result;
use crate::sampling::SamplingOptions;
use serde::{Deserialize, Serialize};

/// One prompt length.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PrefillBenchRow {
    pub prompt_tokens: u32,
    pub strategy: Strategy,
    /// Prefill batches the prompt is cut into (the model's `maxBatch` tokens each).
    pub batches: u32,
    /// Submitting the prompt to having the first generated token on the host.
    pub time_to_first_token_ms: Spread,
    /// prompt_tokens / time to first token.
    pub prefill_tokens_per_second: Spread,
    /// The first batch's prefill body, each dispatch timed alone (with `profile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<StepProfile>,
    /// The prompt as a saved session (with `sessions`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionBenchRow>,
}

/// A prompt's KV cache as a saved session: its size, the time to save it, and the time from
/// restoring it (`load_session`, from bytes in memory) to the first token of a generation that
/// reuses it — against `time_to_first_token_ms`, which prefills the prompt again.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct SessionBenchRow {
    pub bytes: u64,
    pub bytes_per_token: f64,
    /// `save_session`: the cache rows read back and the bytes assembled (host wall time).
    pub save_ms: Spread,
    /// `load_session` and a one-token generation from the same prompt with `reuse_prefix`
    /// (only the prompt's last token runs; host wall time).
    pub restore_to_first_token_ms: Spread,
}

/// Times `runs` greedy one-token generations (after a warm-up) from a prompt of each length,
/// with `strategy`'s prefill and first token; with `profile`, also one batch per role; with
/// `sessions`, also saving the prompt's cache and restoring it to the first token.
pub async fn prefill_bench(
    model: &mut GpuModel,
    lengths: &[u32],
    strategy: Strategy,
    runs: u32,
    profile: bool,
    sessions: bool,
) -> Result<Vec<PrefillBenchRow>> {
    let vocab = model.config().vocab_size;
    let batch = model.max_batch();
    let mut rows = Vec::new();
    for &len in lengths {
        let prompt = prompt_of(len as usize, vocab);
        let request = GenerationRequest {
            prompt: &prompt,
            max_tokens: 1,
            strategy,
            sampler: SamplingOptions::default().resolve(&[])?,
            chunk_tokens: 1,
            reuse_prefix: false,
            constraint: None,
            logprobs: None,
        };
        model.generate(&request, &mut |_| true).await?; // warm-up
        let (mut ttft, mut rate) = (Vec::new(), Vec::new());
        for _ in 0..runs.max(1) {
            let g = model.generate(&request, &mut |_| true).await?;
            ttft.push(g.prefill_seconds * 1e3);
            rate.push(f64::from(len) / g.prefill_seconds.max(1e-9));
        }
        let session = if sessions {
            Some(session_row(model, &request, runs).await?)
        } else {
            None
        };
        let profile = if profile {
            let n = len.min(batch) as usize;
            Some(model.profile_prefill(&prompt[..n], 5).await?)
        } else {
            None
        };
        rows.push(PrefillBenchRow {
            prompt_tokens: len,
            strategy,
            batches: len.div_ceil(batch),
            time_to_first_token_ms: Spread::of(ttft),
            prefill_tokens_per_second: Spread::of(rate),
            profile,
            session,
        });
    }
    Ok(rows)
}

/// [`SessionBenchRow`] of `request`'s prompt, whose generation just ran (its cache holds the
/// prompt).
async fn session_row(
    model: &mut GpuModel,
    request: &GenerationRequest<'_>,
    runs: u32,
) -> Result<SessionBenchRow> {
    let (mut save, mut restore) = (Vec::new(), Vec::new());
    let reuse = GenerationRequest {
        reuse_prefix: true,
        ..*request
    };
    let mut bytes = Vec::new();
    // A warm-up of each, then `runs` timed.
    for run in 0..=runs.max(1) {
        let t0 = now_seconds();
        let (saved, info) = model.save_session().await?;
        let t1 = now_seconds();
        debug_assert_eq!(info.tokens as usize, request.prompt.len());
        model.load_session(&saved).await?;
        let g = model.generate(&reuse, &mut |_| true).await?;
        let t2 = now_seconds();
        debug_assert_eq!(g.reused_prompt_tokens as usize, request.prompt.len() - 1);
        if run > 0 {
            save.push((t1 - t0) * 1e3);
            restore.push((t2 - t1) * 1e3);
        }
        bytes = saved;
    }
    Ok(SessionBenchRow {
        bytes: bytes.len() as u64,
        bytes_per_token: bytes.len() as f64 / request.prompt.len() as f64,
        save_ms: Spread::of(save),
        restore_to_first_token_ms: Spread::of(restore),
    })
}
