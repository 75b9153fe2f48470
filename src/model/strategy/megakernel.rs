//! `megakernel`: the whole generation (prompt ingestion and every decode step, the token chosen
//! by the same GPU sampler) in one dispatch of one workgroup that loops in the shader
//! (`model::megakernel`, llama-family blocks). With `chunk_tokens` below `max_tokens` it runs
//! as one dispatch per chunk, so the host sees tokens at chunk boundaries (and a browser's GPU
//! watchdog never sees one long dispatch). On first use it copies the weights into its arena
//! and has its own KV cache.

use super::seam::{replay_limit, GenerationStrategy, LocalFuture, Pitch};
use crate::error::{FuselmError, Result};
use crate::gpu::StagedRead;
use crate::kernels::megakernel::{MegaCall, MegaParams, MEGAKERNEL_PROMPT_POSITIONS};
use crate::kernels::DecodeState;
use crate::model::generation::{Progress, Run, TokenGeneration};
use crate::model::megakernel::{mega_shape, ConstrainedCall, MegaModel};
use crate::model::shared::Shared;
use std::collections::VecDeque;

/// The planner picks the megakernel on a GPU while one token streams at most this many
/// weight bytes (see [`Megakernel::pitch`]). Natively (wgpu on Vulkan, H200), since
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

/// The megakernel is not timed by a calibration while a token streams more than this many
/// times its planner limit of weights: it loses by an order of magnitude there (SmolLM2 on
/// the H200: 27 tok/s vs fused 1,331), and timing it would copy the weights into its arena.
const TIMING_FACTOR: u64 = 8;

/// The planner's rank for the megakernel: above fused, which it beats on small models.
const RANK: u32 = 30;

pub(crate) struct Megakernel {
    /// Built on first use (it copies the weights into its arena), or why this model cannot
    /// use it.
    mega: Option<Result<MegaModel>>,
}

/// Clones a load-time error of the megakernel (also the grid megakernel's).
pub(super) fn replay_mega(e: &FuselmError) -> FuselmError {
    replay_limit(e).unwrap_or_else(|| match e {
        FuselmError::UnsupportedModel(m) => FuselmError::UnsupportedModel(m.clone()),
        other => FuselmError::Gpu(format!("the megakernel is unavailable: {other}")),
    })
}

/// Builds `slot`'s megakernel if it has none; the built one, or why it cannot run.
pub(super) async fn build<'a>(
    slot: &'a mut Option<Result<MegaModel>>,
    m: &Shared,
) -> Result<&'a mut MegaModel> {
    if slot.is_none() {
        *slot = Some(MegaModel::build(&m.ctx, &m.config, &m.weights, &m.acts, &m.sampler).await);
    }
    match slot {
        Some(Ok(mega)) => Ok(mega),
        Some(Err(e)) => Err(replay_mega(e)),
        None => unreachable!("built above"),
    }
}

/// Whether the megakernel can run this model, without building it: its shape, and no failed
/// build.
pub(super) fn check(slot: &Option<Result<MegaModel>>, m: &Shared) -> Result<()> {
    mega_shape(&m.config, m.acts.n_ctx)?;
    match slot {
        Some(Err(e)) => Err(replay_mega(e)),
        _ => Ok(()),
    }
}

impl Megakernel {
    /// The most weight bytes per token for which the planner picks the megakernel here.
    fn limit(m: &Shared) -> u64 {
        if m.ctx.identity.is_software {
            MEGAKERNEL_SOFTWARE_MAX_WEIGHT_BYTES
        } else if cfg!(target_arch = "wasm32") && m.ctx.subgroups32() {
            MEGAKERNEL_BROWSER_SUBGROUPS_MAX_WEIGHT_BYTES
        } else {
            MEGAKERNEL_GPU_MAX_WEIGHT_BYTES
        }
    }
}

impl GenerationStrategy for Megakernel {
    fn load(_: &Shared) -> LocalFuture<'_, Result<Self>> {
        Box::pin(async { Ok(Self { mega: None }) })
    }

    /// The megakernel is bound to the old activations (state, tokens): rebuilt on use.
    fn rebind<'a>(&'a mut self, _: &'a Shared) -> LocalFuture<'a, Result<()>> {
        self.mega = None;
        Box::pin(async { Ok(()) })
    }

    fn check(&self, m: &Shared) -> Result<()> {
        check(&self.mega, m)
    }

    fn prepare<'a>(&'a mut self, m: &'a Shared) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(async move { build(&mut self.mega, m).await.map(|_| None) })
    }

    /// The one-workgroup megakernel (llama-family blocks) beats fused on a GPU while a token
    /// streams at most [`MEGAKERNEL_GPU_MAX_WEIGHT_BYTES`] of weights (natively on the H200
    /// since 2026-11-25: 1.7–2.8× at 28–92 KB, 1.05–1.14× at 313 KB, 0.63–0.64× at 332 KB,
    /// 0.02× on SmolLM2's 98 MB; through Dawn, as in a browser, without subgroups: 1.7–3.7× up
    /// to 313 KB, 0.99–1.4× at 332 KB, 0.55–1.05× at 1.2 MB, 0.62–0.65× at 1.25 MB; with
    /// 32-wide subgroups up to [`MEGAKERNEL_BROWSER_SUBGROUPS_MAX_WEIGHT_BYTES`]: 1.4–2.7× at
    /// 28–313 KB, 0.72× at 332 KB), and beats unfused on a software adapter up to
    /// [`MEGAKERNEL_SOFTWARE_MAX_WEIGHT_BYTES`] (lavapipe, 2 cores: 1.3–2.2× from 28 KB to
    /// 4.8 MB; 0.5× on SmolLM2), where its one workgroup runs on one CPU thread. Crossovers
    /// measured with `fuselm bench --toy` (bench/results/megakernel-h200-2026-11-24-548148e,
    /// end-to-end tok/s of 64-token generations).
    fn pitch(&self, m: &Shared) -> Pitch {
        let bytes = m.decode_weight_bytes();
        let limit = Self::limit(m);
        let claim = if self.check(m).is_err() {
            Err("it cannot run this model".to_string())
        } else if bytes > limit {
            Err(format!(
                "a token streams {} KB of weights, more than {} KB",
                bytes / 1000,
                limit / 1000
            ))
        } else {
            Ok(format!(
                "a token streams only {} KB of weights (at most {} KB), so one dispatch for \
                 the whole generation beats {} here",
                bytes / 1000,
                limit / 1000,
                if m.ctx.identity.is_software {
                    "one dispatch per operation"
                } else {
                    "4 dispatches per layer"
                }
            ))
        };
        Pitch::Ranked(RANK, claim)
    }

    fn calibrates<'a>(
        &'a mut self,
        m: &'a Shared,
    ) -> LocalFuture<'a, std::result::Result<(), String>> {
        Box::pin(async move {
            let limit = Self::limit(m);
            let bytes = m.decode_weight_bytes();
            if bytes > TIMING_FACTOR * limit {
                return Err(format!(
                    "a token streams {} KB of weights, far beyond where one workgroup can win \
                     (the planner's limit here is {} KB)",
                    bytes / 1000,
                    limit / 1000
                ));
            }
            build(&mut self.mega, m)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }

    /// The whole generation's one dispatch: 0 per step.
    fn dispatches_per_step(&self, _: &Shared, _sampling: bool) -> Result<u32> {
        Ok(0)
    }

    /// A timed generation runs in one dispatch.
    fn timed_chunk(&self, _requested: u32, new_tokens: u32) -> u32 {
        new_tokens
    }

    fn one_dispatch(&self) -> bool {
        true
    }

    /// The constraint's mask applied to the head's logits and its state advanced after each
    /// choice, inside the one dispatch (its table copied into the scratch).
    fn constraints(&self) -> bool {
        true
    }

    fn own_kv_cache(&self) -> bool {
        true
    }

    fn own_kv(&self) -> Option<&wgpu::Buffer> {
        self.mega.as_ref()?.as_ref().ok().map(MegaModel::kv)
    }

    fn generate<'a>(
        &'a mut self,
        m: &'a Shared,
        run: &'a Run<'a>,
        on_token: &'a mut dyn FnMut(u32) -> bool,
    ) -> LocalFuture<'a, Result<TokenGeneration>> {
        Box::pin(async move {
            let mega: &MegaModel = build(&mut self.mega, m).await?;
            generate(mega, &mega.call, None, m, run, on_token).await
        })
    }

    fn bytes(&self) -> u64 {
        match &self.mega {
            Some(Ok(mega)) => mega.bytes(),
            _ => 0,
        }
    }

    fn release(&mut self) -> bool {
        matches!(self.mega.take(), Some(Ok(_)))
    }
}

/// Runs a generation with the megakernel's `call` (the one-workgroup kernel, or the grid
/// kernel of `grid` workgroups).
pub(super) async fn generate(
    mega: &MegaModel,
    call: &MegaCall,
    grid: Option<u32>,
    m: &Shared,
    run: &Run<'_>,
    on_token: &mut dyn FnMut(u32) -> bool,
) -> Result<TokenGeneration> {
    let p = &run.sampler;
    let n = run.prompt.len() as u32;
    let mut prog = Progress::of(run);
    m.write_sampler(p, run.prompt);
    let ctx = &m.ctx;
    ctx.queue
        .write_buffer(&m.acts.tokens, 0, bytemuck::cast_slice(run.prompt));
    ctx.queue.write_buffer(
        &m.acts.state,
        0,
        bytemuck::bytes_of(&DecodeState::new(run.start, 1)),
    );
    // With a constraint: a call of its own whose scratch holds the table and the DFA state.
    let constrained = match run.constraint {
        Some(c) => Some(OneGeneration {
            ctx,
            call: mega.constrained_call(
                ctx,
                &m.acts,
                &m.sampler,
                grid.is_some(),
                c.table,
                c.start,
            )?,
        }),
        None => None,
    };
    let (call, ctab) = match &constrained {
        Some(g) => (&g.call.call, g.call.ctab),
        None => (call, 0),
    };
    let steps = run.chunk_tokens.clamp(1, run.max_tokens);
    let params = MegaParams {
        n_prompt: n,
        end: n + run.max_tokens - 1,
        steps,
        n_lists: mega.shape.n_lists(),
        ctab,
        _pad: [0; 3],
    };
    ctx.queue
        .write_buffer(&mega.params, 0, bytemuck::bytes_of(&params));
    // Each submission: one dispatch, then copies of `state` and of every generated slot.
    // A dispatch can end before its `steps` (an adapter's loop limiter: see
    // megakernel.wgsl), so progress is read from `state`, and dispatches are recorded
    // until it says the generation is over; a surplus dispatch does nothing.
    let slots = u64::from(run.max_tokens) * 4;
    let mut pending: VecDeque<(StagedRead, StagedRead)> = VecDeque::new();
    let mut accepted = 0usize;
    let mut finished = false;
    let mut expected = 0u32; // tokens the recorded dispatches would make without a cap
                             // The next position the recorded dispatches would process (megakernel.wgsl's `stop`).
    let mut predicted = run.start;
    let mut last_pos = run.start;
    while !finished {
        // Keep the GPU busy: queue the next dispatch before waiting for this one.
        while pending.len() < 2 && (expected < run.max_tokens || pending.is_empty()) {
            let mut enc = m.encoder();
            if grid.is_some() {
                enc.clear_buffer(&mega.gsync, 0, None);
            }
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                call.record(&mut pass, 1);
            }
            let state = StagedRead::copy(&ctx.device, &mut enc, &m.acts.state, 0, 16);
            let ids = StagedRead::copy(
                &ctx.device,
                &mut enc,
                &m.acts.tokens,
                u64::from(n) * 4,
                slots,
            );
            let index = ctx.queue.submit([enc.finish()]);
            pending.push_back((state.submitted(index.clone()), ids.submitted(index)));
            prog.out.submits += 1;
            prog.out.dispatches += 1;
            let stop = (predicted
                .max(n - 1)
                .min(predicted + MEGAKERNEL_PROMPT_POSITIONS)
                + steps)
                .min(params.end);
            predicted = stop;
            expected = stop.saturating_sub(n - 1);
        }
        let Some((state, ids)) = pending.pop_front() else {
            break;
        };
        let st: DecodeState = bytemuck::pod_read_unaligned(&state.read(&ctx.device).await?);
        let ids: Vec<u32> = bytemuck::pod_collect_to_vec(&ids.read(&ctx.device).await?);
        // Tokens chosen so far: positions n - 1 .. st.pos - 1 chose tokens n .. st.pos.
        let made = (st.pos + 1).saturating_sub(n).min(run.max_tokens) as usize;
        prog.out.decode_steps = made.saturating_sub(1) as u64;
        // Still in the prompt (a dispatch ingests at most 32 positions + steps): the caller
        // may stop here.
        if made == 0 && !(run.keep_going)() {
            return prog.aborted();
        }
        for &id in &ids[accepted..made] {
            accepted += 1;
            if !prog.accept(id, p, run.max_tokens, on_token) {
                return prog.finish();
            }
        }
        finished = made == run.max_tokens as usize || st.done != 0;
        if !finished && st.aux == 2 {
            let workgroups = grid.unwrap_or(1);
            return Err(FuselmError::Gpu(format!(
                "a grid barrier of the grid megakernel timed out at position {}: this \
                 adapter did not keep {workgroups} workgroups running at once; use fewer \
                 (grid workgroups) or the megakernel strategy",
                st.pos
            )));
        }
        if !finished && st.pos == last_pos {
            return Err(FuselmError::Gpu(if st.aux == 1 {
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
                    st.pos, st.done, st.aux
                )
            }));
        }
        last_pos = st.pos;
        if !finished && pending.is_empty() {
            expected = made as u32; // it stopped early: record more
            predicted = st.pos;
        }
    }
    prog.finish()
}

/// A constrained call bound for one generation: its scratch goes when the generation ends
/// (early returns and errors included).
struct OneGeneration<'a> {
    ctx: &'a crate::gpu::GpuContext,
    call: ConstrainedCall,
}

impl Drop for OneGeneration<'_> {
    fn drop(&mut self) {
        self.call.release(self.ctx);
    }
}
