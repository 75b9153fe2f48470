//! `unfused`: the baseline a straightforward WebGPU pipeline is — one dispatch per operation
//! (~15 per layer, `model::step`), one submit per token, the logits read back and the token
//! sampled on the host (`sampling::reference`, the same arithmetic as the GPU sampler). It
//! keeps the shared KV cache and uses the shared prefill, so against `fused` it measures
//! dispatch and round-trip overhead, never recomputation. It runs every model: the planner's
//! fallback.

use super::seam::{GenerationStrategy, LocalFuture, Pitch};
use crate::clock::now_seconds;
use crate::error::Result;
use crate::gpu::StagedRead;
use crate::kernels::DecodeState;
use crate::model::generation::{Progress, Run, TokenGeneration};
use crate::model::shared::Shared;
use crate::model::step::{Step, StepKind};
use crate::sampling::{logprobs, reference, NONFINITE_ID};

pub(crate) struct Unfused {
    /// The per-operation decode step (one token), bound to the shared activations.
    decode: Step,
}

impl GenerationStrategy for Unfused {
    fn load(m: &Shared) -> LocalFuture<'_, Result<Self>> {
        Box::pin(async move {
            Ok(Self {
                decode: m.bind_step(StepKind::Decode)?,
            })
        })
    }

    fn rebind<'a>(&'a mut self, m: &'a Shared) -> LocalFuture<'a, Result<()>> {
        Box::pin(async move {
            self.decode = m.bind_step(StepKind::Decode)?;
            Ok(())
        })
    }

    fn check(&self, _: &Shared) -> Result<()> {
        Ok(())
    }

    fn prepare<'a>(&'a mut self, _: &'a Shared) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(async { Ok(None) })
    }

    fn pitch(&self, _: &Shared) -> Pitch {
        Pitch::Fallback
    }

    fn calibrates<'a>(
        &'a mut self,
        _: &'a Shared,
    ) -> LocalFuture<'a, std::result::Result<(), String>> {
        Box::pin(async { Ok(()) })
    }

    /// The constraint's mask applied on the host, with the CPU reference sampler.
    fn constraints(&self) -> bool {
        true
    }

    /// From the logits it reads back, with the CPU reference (`sampling::logprobs`).
    fn logprobs(&self) -> bool {
        true
    }

    fn dispatches_per_step(&self, _: &Shared, _sampling: bool) -> Result<u32> {
        Ok(self.decode.dispatches())
    }

    fn generate<'a>(
        &'a mut self,
        m: &'a Shared,
        run: &'a Run<'a>,
        on_token: &'a mut dyn FnMut(u32) -> bool,
    ) -> LocalFuture<'a, Result<TokenGeneration>> {
        Box::pin(async move { self.run(m, run, on_token).await })
    }
}

impl Unfused {
    async fn run(
        &self,
        m: &Shared,
        run: &Run<'_>,
        on_token: &mut dyn FnMut(u32) -> bool,
    ) -> Result<TokenGeneration> {
        let p = &run.sampler;
        let n = run.prompt.len() as u32;
        let mut prog = Progress::of(run);
        let mut sequence = run.prompt.to_vec();
        let Some(last) = m
            .prefill_all_but_last(run.prompt, run.start, run.keep_going)
            .await?
        else {
            return prog.aborted();
        };
        prog.out.submits += u64::from((last - run.start).div_ceil(m.acts.max_batch.max(1)));
        prog.out.dispatches += u64::from(m.prefill.dispatches()) * prog.out.submits;
        let vocab_bytes = u64::from(m.config.vocab_size) * 4;
        for i in 0..run.max_tokens {
            let ctx = &m.ctx;
            let record_start = now_seconds();
            if i > 0 {
                // The token chosen on the host goes back to the GPU: id and position.
                let pos = n + i - 1;
                ctx.queue.write_buffer(
                    &m.acts.tokens,
                    u64::from(pos) * 4,
                    bytemuck::bytes_of(&sequence[pos as usize]),
                );
                ctx.queue.write_buffer(
                    &m.acts.state,
                    0,
                    bytemuck::bytes_of(&DecodeState::new(pos, 1)),
                );
            }
            let mut enc = m.encoder();
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                if i == 0 {
                    m.prefill.record(&mut pass, n - last)?;
                } else {
                    self.decode.record(&mut pass, 1)?;
                }
            }
            // One staging buffer reused across tokens, as any careful pipeline would.
            let read = StagedRead::copy_pooled(
                &ctx.device,
                &m.staging,
                &mut enc,
                &m.acts.logits,
                0,
                vocab_bytes,
            );
            let read = read.submitted(ctx.queue.submit([enc.finish()]));
            if i > 0 {
                prog.out.record_seconds += now_seconds() - record_start;
            }
            prog.out.submits += 1;
            prog.out.dispatches += u64::from(if i == 0 {
                m.prefill.dispatches()
            } else {
                self.decode.dispatches()
            });
            prog.out.decode_steps += u64::from(i > 0);
            let logits: Vec<f32> = bytemuck::pod_collect_to_vec(&read.read(&ctx.device).await?);
            let position = n + i;
            let counts = reference::window_counts(&sequence, position as usize, p.penalty_last_n);
            let mask = run
                .constraint
                .zip(prog.constraint_state())
                .map(|(c, s)| c.automaton.mask(s));
            // Non-finite logits end the generation with a `numerical` error, as on the GPU.
            let id = if logits.iter().all(|z| z.is_finite()) {
                reference::sample_masked(&logits, &counts, p, position, mask)
            } else {
                NONFINITE_ID
            };
            sequence.push(id);
            let logprob = run
                .logprobs
                .filter(|_| id != NONFINITE_ID)
                .map(|top_n| logprobs::reference(&logits, &counts, p, mask, id, top_n));
            if !prog.accept_with(id, logprob, p, run.max_tokens, on_token) {
                break;
            }
        }
        prog.finish()
    }
}
