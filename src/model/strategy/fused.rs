//! `fused`: 4 dispatches per layer (`model::fused_step`, `kernels::fused_layer`), the token
//! chosen on the GPU and fed to the next step's embedding on the GPU, a whole chunk of steps
//! in one compute pass; the host only reads tokens at chunk boundaries, while the next chunk
//! is already queued. A stop id sets `state.done` on the GPU and the rest of the recorded
//! steps do nothing. Chunks start at [`FIRST_CHUNK`] steps and grow up to the caller's
//! `chunk_tokens` only while the GPU is the bound (`model::chunk_ramp`).

use super::seam::{replay_limit, GenerationStrategy, LocalFuture, Pitch};
use crate::clock::now_seconds;
use crate::error::{FuselmError, Result};
use crate::gpu::StagedRead;
use crate::kernels::pipeline::PassState;
use crate::model::chunk_ramp::ChunkRamp;
use crate::model::fused_step::{fused_shape, Fused as FusedKernels};
use crate::model::generation::{Progress, Run, TokenGeneration};
use crate::model::profile::{profile_step, StepProfile};
use crate::model::shared::Shared;
use crate::sampling::logprobs::{TokenLogprobs, LOGPROB_STRIDE};
use std::collections::VecDeque;

/// Steps of the first decode chunk; later ones grow while the GPU is the bound (`ChunkRamp`),
/// up to `chunk_tokens`.
const FIRST_CHUNK: u32 = 4;

/// The planner's rank for fused (the megakernel's is above it).
const RANK: u32 = 20;

pub(crate) struct Fused {
    /// The fused decode step with its head and GPU sampler, or why this model cannot use it
    /// (kept: a model beyond the fused kernels' limits runs with the others); `None` until
    /// first use. Compiling the fused kernels is most of a load's compile time in a browser on
    /// a software adapter (~8 of 10 s per load on SwiftShader), where the planner never picks
    /// fused: the load builds them only when fused is the default (`build_at_load`).
    kernels: Option<std::result::Result<FusedKernels, FuselmError>>,
}

/// Clones the load-time error.
fn replay(e: &FuselmError) -> FuselmError {
    replay_limit(e).unwrap_or_else(|| {
        FuselmError::InvalidArgument(format!(
            "the fused strategy is unavailable for this model: {e}"
        ))
    })
}

impl Fused {
    /// The built kernels, building them on first use; or why fused cannot run this model.
    async fn built(&mut self, m: &Shared) -> Result<&FusedKernels> {
        if self.kernels.is_none() {
            self.kernels = Some(bind(m).await);
        }
        self.ready()
    }

    /// The kernels once built (else "not prepared", or why fused cannot run this model).
    fn ready(&self) -> Result<&FusedKernels> {
        match &self.kernels {
            Some(Ok(fused)) => Ok(fused),
            Some(Err(e)) => Err(replay(e)),
            None => Err(FuselmError::InvalidArgument(
                "the fused strategy is not prepared yet (run a generation with it first)".into(),
            )),
        }
    }
}

impl GenerationStrategy for Fused {
    fn load(_: &Shared) -> LocalFuture<'_, Result<Self>> {
        Box::pin(async move { Ok(Self { kernels: None }) })
    }

    /// The kernels are bound to the old activations: rebuilt on next use.
    fn rebind<'a>(&'a mut self, _: &'a Shared) -> LocalFuture<'a, Result<()>> {
        self.kernels = None;
        Box::pin(async { Ok(()) })
    }

    /// The fused kernels' shape limits, and no failed build.
    fn check(&self, m: &Shared) -> Result<()> {
        fused_shape(&m.config, m.acts.n_ctx, &m.ctx).check_device(&m.ctx)?;
        match &self.kernels {
            Some(Err(e)) => Err(replay(e)),
            _ => Ok(()),
        }
    }

    fn prepare<'a>(&'a mut self, m: &'a Shared) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(async move { self.built(m).await.map(|_| None) })
    }

    fn build_at_load(&self) -> bool {
        true
    }

    /// The constraint's mask before the head, its state advanced by sample_choose.
    fn constraints(&self) -> bool {
        true
    }

    /// Two kernels after each step's choice (`kernels::logprobs`).
    fn logprobs(&self) -> bool {
        true
    }

    /// Fused on GPUs; not on software adapters, where a dispatch costs little next to the work
    /// (fused measured 0.8–1.2× unfused on lavapipe's toy grid and 0.4–0.6× on SwiftShader).
    fn pitch(&self, m: &Shared) -> Pitch {
        Pitch::Ranked(
            RANK,
            match self.check(m) {
                Err(e) => Err(format!(
                    "the fused kernels cannot run this model here ({e})"
                )),
                Ok(()) if m.ctx.identity.is_software => Err(
                    "this is a software (CPU) adapter, where a dispatch costs little next to \
                     the work and the fused kernels' extra per-workgroup work makes them slower"
                        .into(),
                ),
                Ok(()) => Ok(
                    "4 dispatches per layer with sampling on the GPU, instead of one \
                              dispatch per operation and a readback per token"
                        .into(),
                ),
            },
        )
    }

    fn calibrates<'a>(
        &'a mut self,
        m: &'a Shared,
    ) -> LocalFuture<'a, std::result::Result<(), String>> {
        Box::pin(async move { self.check(m).map_err(|e| e.to_string()) })
    }

    fn dispatches_per_step(&self, _: &Shared, sampling: bool) -> Result<u32> {
        let f = self.ready()?;
        // At a short context (a step within the first attention chunk).
        Ok(f.decode.body_dispatches(1) + f.choice.dispatches(sampling))
    }

    fn generate<'a>(
        &'a mut self,
        m: &'a Shared,
        run: &'a Run<'a>,
        on_token: &'a mut dyn FnMut(u32) -> bool,
    ) -> LocalFuture<'a, Result<TokenGeneration>> {
        Box::pin(async move {
            let fused = self.built(m).await?;
            generate(fused, m, run, on_token).await
        })
    }

    fn profile<'a>(
        &'a self,
        m: &'a Shared,
        context: u32,
        reps: u32,
    ) -> LocalFuture<'a, Result<StepProfile>> {
        Box::pin(async move {
            let fused = self.ready()?;
            let c = &m.config;
            let kv_bytes = 2 * u64::from(c.head_dim) * m.kv.bytes();
            let mut calls = fused.decode.roles(context, kv_bytes);
            calls.extend(fused.choice.roles(m.head_bytes()));
            // The whole step in one pass (the choice advances the state each time: harmless
            // here).
            let step = |p: &mut wgpu::ComputePass<'_>| {
                let _ = fused
                    .decode
                    .record_body(p, &mut PassState::default(), context);
                fused.choice.record(p, false);
            };
            profile_step(&m.ctx, &calls, step, context, reps).await
        })
    }
}

async fn bind(m: &Shared) -> std::result::Result<FusedKernels, FuselmError> {
    FusedKernels::bind(&m.ctx, &m.config, &m.weights, &m.acts, &m.sampler, m.kv).await
}

async fn generate(
    fused: &FusedKernels,
    m: &Shared,
    run: &Run<'_>,
    on_token: &mut dyn FnMut(u32) -> bool,
) -> Result<TokenGeneration> {
    let p = &run.sampler;
    let sampling = !p.greedy();
    let n = run.prompt.len() as u32;
    let mut prog = Progress::of(run);
    m.write_sampler(p, run.prompt);
    // Compiled (on a model's first generation with them) before the prompt runs, so an error
    // costs no prefill.
    let logprob_kernels = match run.logprobs {
        Some(_) => Some(fused.choice.logprob_kernels(&m.ctx).await?),
        None => None,
    };
    let Some(last) = m
        .prefill_all_but_last(run.prompt, run.start, run.keep_going)
        .await?
    else {
        return prog.aborted();
    };
    // With a constraint: its mask before each head, its state (from the start) in state.aux.
    let constrained;
    let choice = match run.constraint {
        Some(c) => {
            constrained = OneGeneration {
                ctx: &m.ctx,
                choice: fused.choice.constrained(&m.ctx, c.table).await?,
            };
            m.write_state_aux(last, n - last, c.start);
            &constrained.choice
        }
        None => &fused.choice,
    };
    // With log-probabilities: their kernels after the choice, their rows read with the tokens.
    let with_logprobs;
    let choice = match (run.logprobs, logprob_kernels) {
        (Some(top_n), Some(kernels)) => {
            with_logprobs = LogprobGeneration {
                ctx: &m.ctx,
                choice: choice.with_logprobs(&m.ctx, kernels, top_n)?,
            };
            &with_logprobs.choice
        }
        _ => choice,
    };
    let rows = choice.logprob_rows();
    let stride = u64::from(LOGPROB_STRIDE) * 4;
    prog.out.submits += u64::from((last - run.start).div_ceil(m.acts.max_batch.max(1)));
    prog.out.dispatches += u64::from(m.prefill.dispatches()) * prog.out.submits;
    let ctx = &m.ctx;
    // (the read, its tokens, whether it is a decode chunk rather than the prompt's pass, the
    // read of their log-probability rows)
    let mut pending: VecDeque<(StagedRead, u32, bool, Option<StagedRead>)> = VecDeque::new();

    // The last prompt batch and the first token: one pass.
    let mut enc = m.encoder();
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        m.prefill.record_body(&mut pass, n - last)?;
        choice.record(&mut pass, sampling);
    }
    let read = StagedRead::copy_pooled(
        &ctx.device,
        &m.staging,
        &mut enc,
        &m.acts.tokens,
        u64::from(n) * 4,
        4,
    );
    let lp_read = rows.map(|r| {
        StagedRead::copy_pooled(
            &ctx.device,
            &m.staging,
            &mut enc,
            r,
            u64::from(n) * stride,
            stride,
        )
    });
    let submitted = ctx.queue.submit([enc.finish()]);
    pending.push_back((
        read.submitted(submitted.clone()),
        1,
        false,
        lp_read.map(|r| r.submitted(submitted)),
    ));
    prog.out.submits += 1;
    prog.out.dispatches += u64::from(m.prefill.dispatches() - 2 + choice.dispatches(sampling));
    // Tokens whose steps are recorded.
    let mut recorded = 1u32;
    // Chunks start at FIRST_CHUNK steps: the host records the next chunk before it waits for
    // the first token, and recording a full chunk (~125 dispatches a step on SmolLM2) took
    // longer than the prompt's GPU work (TTFT ~13 ms natively, ~36 ms in wasm, at 32). They
    // grow only while the GPU is the bound (`ChunkRamp`).
    let mut ramp = ChunkRamp::new(FIRST_CHUNK, run.chunk_tokens);
    let head_dispatches = u64::from(choice.dispatches(sampling));

    while let Some((read, count, decode, lp_read)) = pending.pop_front() {
        // Keep the GPU busy: queue the next chunk before waiting for this one.
        while pending.is_empty() && recorded < run.max_tokens {
            let steps = ramp.next_steps().min(run.max_tokens - recorded);
            let record_start = now_seconds();
            let mut enc = m.encoder();
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                let mut set = PassState::default();
                for i in 0..steps {
                    // The step producing token index recorded + i sees n + recorded + i keys.
                    let len = n + recorded + i;
                    fused.decode.record_body(&mut pass, &mut set, len)?;
                    choice.record(&mut pass, sampling);
                    set.touched(0);
                    prog.out.dispatches +=
                        u64::from(fused.decode.body_dispatches(len)) + head_dispatches;
                }
            }
            let read = StagedRead::copy_pooled(
                &ctx.device,
                &m.staging,
                &mut enc,
                &m.acts.tokens,
                u64::from(n + recorded) * 4,
                u64::from(steps) * 4,
            );
            let lp_read = rows.map(|r| {
                StagedRead::copy_pooled(
                    &ctx.device,
                    &m.staging,
                    &mut enc,
                    r,
                    u64::from(n + recorded) * stride,
                    u64::from(steps) * stride,
                )
            });
            let submitted = ctx.queue.submit([enc.finish()]);
            pending.push_back((
                read.submitted(submitted.clone()),
                steps,
                true,
                lp_read.map(|r| r.submitted(submitted)),
            ));
            let record = now_seconds() - record_start;
            ramp.recorded(steps, record);
            prog.out.record_seconds += record;
            prog.out.submits += 1;
            prog.out.decode_steps += u64::from(steps);
            recorded += steps;
        }
        let wait_start = now_seconds();
        let ids: Vec<u32> = bytemuck::pod_collect_to_vec(&read.read(&ctx.device).await?);
        if decode {
            ramp.waited(count, now_seconds() - wait_start);
        }
        let lp_rows: Vec<u32> = match lp_read {
            Some(r) => bytemuck::pod_collect_to_vec(&r.read(&ctx.device).await?),
            None => Vec::new(),
        };
        let mut lp_rows = lp_rows.chunks_exact(LOGPROB_STRIDE as usize);
        for &id in ids.iter().take(count as usize) {
            let logprob = lp_rows.next().map(TokenLogprobs::from_row);
            if !prog.accept_with(id, logprob, p, run.max_tokens, on_token) {
                return prog.finish();
            }
        }
    }
    prog.finish()
}

/// A choice with log-probabilities bound for one generation: its kernels' buffers go when the
/// generation ends.
struct LogprobGeneration<'a> {
    ctx: &'a crate::gpu::GpuContext,
    choice: crate::model::fused_step::Choice,
}

impl Drop for LogprobGeneration<'_> {
    fn drop(&mut self) {
        self.choice.release_logprobs(self.ctx);
    }
}

/// A constrained choice bound for one generation: its buffers go when the generation ends
/// (early returns and errors included), so constrained generations make none that outlive them.
struct OneGeneration<'a> {
    ctx: &'a crate::gpu::GpuContext,
    choice: crate::model::fused_step::Choice,
}

impl Drop for OneGeneration<'_> {
    fn drop(&mut self) {
        self.choice.release_constrained(self.ctx);
    }
}
