//! Prompt ingestion: time to first token and prefill tokens per second at given prompt lengths,
//! and where one prefill batch's time goes per kernel role (`fuselm prefill-bench`; on the GPU
//! machine through `bench/gpu cli`). The prompts are `bench`'s synthetic ones.

use super::bench::{prompt_of, Spread};
use super::gpu_model::{GenerationRequest, GpuModel};
use super::profile::StepProfile;
use super::strategy::Strategy;
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
}

/// Times `runs` greedy one-token generations (after a warm-up) from a prompt of each length,
/// with `strategy`'s prefill and first token; with `profile`, also one batch per role.
pub async fn prefill_bench(
    model: &mut GpuModel,
    lengths: &[u32],
    strategy: Strategy,
    runs: u32,
    profile: bool,
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
        });
    }
    Ok(rows)
}
