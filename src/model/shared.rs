//! What every strategy of a loaded model shares: the device, the weights, the per-operation
//! kernels and the prefill built from them, the activations with the KV cache, the GPU
//! sampler's buffers and the readback staging pool. [`GpuModel`](super::GpuModel) owns one
//! `Shared` and lends it to the strategy that runs a generation.

use super::activations::{Activations, SamplerBuffers};
use super::gpu_weights::{is_model_tensor, is_vector, ModelWeights};
use super::step::{Kernels, Step, StepKind};
use crate::error::{FuselmError, Result};
use crate::gguf::{Gguf, ModelConfig};
use crate::gpu::{read_buffer, GpuContext, StagingPool, Submitted};
use crate::kernels::{DecodeState, KvFormat, WeightFormat};
use crate::sampling::{reference, SamplerParams};

/// Prefill batches queued on the GPU at once (`Shared::prefill_all_but_last`): two keep it
/// busy while the host waits for the older one, and bound how long an abort takes.
pub(crate) const PREFILL_IN_FLIGHT: usize = 2;

/// KV capacity, prefill batch and KV format of a load.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sizes {
    pub n_ctx: u32,
    pub max_batch: u32,
    pub kv: KvFormat,
}

/// Refuses a model that cannot fit the adapter before anything is uploaded (the streaming loader
/// calls it as soon as the header has arrived, before the weights are downloaded): weights with
/// no GPU kernel, a weight row or an activation/KV buffer over the adapter's binding limit.
pub(crate) fn check_fit(
    ctx: &GpuContext,
    config: &ModelConfig,
    gguf: &Gguf,
    sizes: Sizes,
) -> Result<()> {
    ModelWeights::check_supported(config)?;
    let limits = ctx.device.limits();
    let cap = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    let over = |needed: u64| -> Result<()> {
        if needed > cap {
            return Err(FuselmError::LimitExceeded {
                limit: "maxStorageBufferBindingSize",
                needed,
                available: cap,
            });
        }
        Ok(())
    };
    for t in gguf.tensors() {
        if !is_model_tensor(&t.name, config) {
            continue;
        }
        let ty = t.ggml_type()?;
        if is_vector(&t.name) {
            continue;
        }
        let format = WeightFormat::from_ggml(ty)?;
        over(format.gpu_row_bytes(t.dims.first().copied().unwrap_or(1)))?;
    }
    let Sizes {
        n_ctx,
        max_batch,
        kv,
    } = sizes;
    let kv_dim = u64::from(config.n_head_kv) * u64::from(config.head_dim);
    // The kernels' loop bounds read from uniform buffers are these shapes, positions below
    // n_ctx and counts derived from the vocabulary: the proofs that their loops terminate
    // (gpu::loop_proof) assume each is below LOOP_PARAM_LIMIT (2^31).
    for (what, value) in [
        ("context length", u64::from(n_ctx)),
        ("batch", u64::from(max_batch)),
        ("vocabulary", u64::from(config.vocab_size)),
        ("n_embd", u64::from(config.n_embd)),
        ("n_ff", u64::from(config.n_ff)),
        (
            "n_head * head_dim",
            u64::from(config.n_head) * u64::from(config.head_dim),
        ),
        ("n_head_kv * head_dim", kv_dim),
    ] {
        if value >= crate::gpu::LOOP_PARAM_LIMIT {
            return Err(FuselmError::LimitExceeded {
                limit: what,
                needed: value,
                available: crate::gpu::LOOP_PARAM_LIMIT - 1,
            });
        }
    }
    over(kv_dim * u64::from(n_ctx) * kv.bytes())?;
    let widest = u64::from(
        config
            .n_ff
            .max(config.n_embd)
            .max(config.n_head * config.head_dim),
    );
    over(u64::from(max_batch) * widest * 4)?;
    over(u64::from(config.vocab_size) * 4)?;
    Ok(())
}

/// The out-of-memory and validation error scopes around a load; popped into a typed error.
/// Fields drop in order, so `invalid` (pushed last) is popped first on an early return.
pub(crate) struct LoadScopes {
    invalid: wgpu::ErrorScopeGuard,
    oom: wgpu::ErrorScopeGuard,
}

impl LoadScopes {
    pub(crate) fn push(ctx: &GpuContext) -> Self {
        let oom = ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let invalid = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        Self { invalid, oom }
    }

    pub(crate) async fn pop(self) -> Result<()> {
        if let Some(e) = self.invalid.pop().await {
            return Err(FuselmError::Gpu(format!("loading the model: {e}")));
        }
        if let Some(e) = self.oom.pop().await {
            return Err(FuselmError::Gpu(format!(
                "loading the model: the GPU ran out of memory ({e}); try a smaller nCtx or model"
            )));
        }
        Ok(())
    }
}

pub(crate) struct Shared {
    pub ctx: GpuContext,
    pub config: ModelConfig,
    pub weights: ModelWeights,
    /// The per-operation kernels (prefill, the unfused decode step, teacher forcing).
    pub kernels: Kernels,
    pub acts: Activations,
    pub kv: KvFormat,
    /// The prefill every strategy but the megakernels runs (batched matmuls).
    pub prefill: Step,
    /// Teacher forcing's step (every position's logits), bound on first use.
    pub all_logits: Option<Step>,
    pub sampler: SamplerBuffers,
    /// Staging buffers for token and logits readbacks, reused across chunks and tokens.
    pub staging: StagingPool,
}

impl Shared {
    /// Compiles the per-operation kernels and allocates and binds the shared buffers (inside
    /// the caller's load error scopes).
    pub(crate) async fn build(
        ctx: GpuContext,
        config: ModelConfig,
        mut weights: ModelWeights,
        sizes: Sizes,
    ) -> Result<Self> {
        weights.stack_layers(&ctx);
        let Sizes {
            n_ctx,
            max_batch,
            kv,
        } = sizes;
        let kernels = Kernels::new(&ctx, &weights, kv, config.head_dim, max_batch).await?;
        let acts = Activations::new(&ctx, &config, n_ctx, max_batch, kv, false)?;
        let prefill = Step::bind(&ctx, &kernels, &weights, &acts, &config, StepKind::Prefill)?;
        let sampler = SamplerBuffers::new(&ctx, &weights, config.vocab_size);
        Ok(Self {
            ctx,
            config,
            weights,
            kernels,
            acts,
            kv,
            prefill,
            all_logits: None,
            sampler,
            staging: StagingPool::default(),
        })
    }

    /// A per-operation step of `kind` bound to the current activations.
    pub(crate) fn bind_step(&self, kind: StepKind) -> Result<Step> {
        Step::bind(
            &self.ctx,
            &self.kernels,
            &self.weights,
            &self.acts,
            &self.config,
            kind,
        )
    }

    /// Reallocates the activations with the teacher-forcing logits buffer and binds the
    /// prefill and teacher-forcing steps to them (every strategy must bind again). Returns
    /// whether anything changed.
    pub(crate) fn add_all_logits(&mut self) -> Result<bool> {
        if self.all_logits.is_some() {
            return Ok(false);
        }
        let acts = Activations::new(
            &self.ctx,
            &self.config,
            self.acts.n_ctx,
            self.acts.max_batch,
            self.kv,
            true,
        )?;
        std::mem::replace(&mut self.acts, acts).release(&self.ctx);
        self.prefill = self.bind_step(StepKind::Prefill)?;
        self.all_logits = Some(self.bind_step(StepKind::AllLogits)?);
        Ok(true)
    }

    /// Bytes of the output head on the GPU.
    pub(crate) fn head_bytes(&self) -> u64 {
        self.weights.head().gpu_bytes()
    }

    /// Weight bytes one decode step streams: every layer matrix and the output head (the
    /// norms and one embedding row are negligible and not counted).
    pub(crate) fn decode_weight_bytes(&self) -> u64 {
        let layers: u64 = self
            .weights
            .layers
            .iter()
            .map(|l| {
                [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
                    .into_iter()
                    .map(|w| w.gpu_bytes())
                    .sum::<u64>()
            })
            .sum();
        layers + self.head_bytes()
    }

    pub(crate) fn check_tokens(&self, tokens: &[u32], extra: u32) -> Result<()> {
        super::cpu_reference::check_tokens(tokens, self.config.vocab_size)?;
        let needed = tokens.len() as u64 + u64::from(extra);
        if needed > u64::from(self.acts.n_ctx) {
            return Err(FuselmError::LimitExceeded {
                limit: "nCtx (KV-cache capacity in tokens)",
                needed,
                available: u64::from(self.acts.n_ctx),
            });
        }
        Ok(())
    }

    pub(crate) fn write_state(&self, pos: u32, n_tokens: u32) {
        self.write_state_aux(pos, n_tokens, 0);
    }

    /// [`Shared::write_state`] with `aux` (a constraint's start state).
    pub(crate) fn write_state_aux(&self, pos: u32, n_tokens: u32, aux: u32) {
        let state = DecodeState {
            aux,
            ..DecodeState::new(pos, n_tokens)
        };
        self.ctx
            .queue
            .write_buffer(&self.acts.state, 0, bytemuck::bytes_of(&state));
    }

    pub(crate) fn encoder(&self) -> wgpu::CommandEncoder {
        self.ctx.device.create_command_encoder(&Default::default())
    }

    pub(crate) fn submit(
        &self,
        record: impl FnOnce(&mut wgpu::ComputePass<'_>) -> Result<()>,
    ) -> Result<wgpu::SubmissionIndex> {
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("fuselm forward"),
                timestamp_writes: None,
            });
            record(&mut pass)?;
        }
        Ok(self.ctx.queue.submit([encoder.finish()]))
    }

    /// Writes the prompt and runs every prefill batch but the last, from position `start` (the
    /// rows before it are already in the KV cache); returns the last batch's start, whose state
    /// is written and which the caller records with a head, or None when `keep_going` said
    /// stop.
    ///
    /// At most [`PREFILL_IN_FLIGHT`] batches are queued: before queueing another the host
    /// waits for the oldest and asks `keep_going`, so an abort takes effect when the batch
    /// running at that moment ends (the one queued behind it still runs on the GPU).
    pub(crate) async fn prefill_all_but_last(
        &self,
        prompt: &[u32],
        start: u32,
        keep_going: &dyn Fn() -> bool,
    ) -> Result<Option<u32>> {
        if !keep_going() {
            return Ok(None);
        }
        self.ctx
            .queue
            .write_buffer(&self.acts.tokens, 0, bytemuck::cast_slice(prompt));
        let n = prompt.len() as u32;
        let mut pos = start;
        let mut in_flight = std::collections::VecDeque::new();
        while n - pos > self.acts.max_batch {
            if in_flight.len() == PREFILL_IN_FLIGHT {
                if let Some(oldest) = in_flight.pop_front() {
                    Submitted::wait(oldest, &self.ctx.device).await?;
                }
                if !keep_going() {
                    return Ok(None);
                }
            }
            let batch = self.acts.max_batch;
            self.write_state(pos, batch);
            let index = self.submit(|pass| self.prefill.record_body(pass, batch))?;
            in_flight.push_back(Submitted::track(&self.ctx.queue, index));
            pos += batch;
        }
        self.write_state(pos, n - pos);
        Ok(Some(pos))
    }

    /// Writes the GPU sampler's settings and the penalty counts of the prompt's window.
    pub(crate) fn write_sampler(&self, p: &SamplerParams, prompt: &[u32]) {
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

    /// Reads `bytes` of `buffer` from offset 0 (after the queue's work).
    pub(crate) async fn read(&self, buffer: &wgpu::Buffer, bytes: u64) -> Result<Vec<u8>> {
        read_buffer(&self.ctx.device, &self.ctx.queue, buffer, 0, bytes).await
    }
}
