//! The seam every generation strategy implements: [`GenerationStrategy`]. A strategy is one
//! type in one file of `model/strategy/` that owns its GPU state and answers everything the
//! rest of the model asks about it; `strategy/mod.rs` registers it in one line.

use crate::error::{FuselmError, Result};
use crate::model::generation::{Run, TokenGeneration};
use crate::model::profile::StepProfile;
use crate::model::shared::Shared;
use std::future::Future;
use std::pin::Pin;

/// A future that borrows the model (the trait's async methods return one, so that strategies
/// can sit behind `dyn`). Not `Send`: in a browser everything runs on one thread.
pub(crate) type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// What a strategy tells the planner (`auto`) about a model on this adapter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Pitch {
    /// Run only when named (experimental): the planner and calibration leave it out.
    OptIn,
    /// The baseline, which runs every model: the planner's choice when every ranked strategy
    /// passes, for the reason the lowest-ranked one passed.
    Fallback,
    /// A candidate; the planner takes the highest `rank` that claims the model:
    /// `Ok(why it wins here)` or `Err(why it passes)`, each one sentence without the name.
    Ranked(u32, std::result::Result<String, String>),
}

/// How a generation is run on the GPU (see `strategy/mod.rs` for the registered ones).
pub(crate) trait GenerationStrategy {
    /// The strategy for a model whose shared buffers are `m`, with what it builds up front
    /// compiled and bound. A strategy that cannot run this model still loads; `check` says
    /// why. Only errors that leave the model unusable fail the load.
    fn load(m: &Shared) -> LocalFuture<'_, Result<Self>>
    where
        Self: Sized;

    /// Binds again after the shared activations were reallocated (teacher forcing adds a
    /// buffer); what it builds on first use is dropped and rebuilt then.
    fn rebind<'a>(&'a mut self, m: &'a Shared) -> LocalFuture<'a, Result<()>>;

    /// Whether it can run this model here, from what is known without building anything
    /// (else the typed reason).
    fn check(&self, m: &Shared) -> Result<()>;

    /// Makes it ready to run, building what it builds on first use (else the typed reason);
    /// `Some(note)` when there is something a report should say (the bench's notes).
    fn prepare<'a>(&'a mut self, m: &'a Shared) -> LocalFuture<'a, Result<Option<String>>>;

    /// Whether a load builds it (`prepare`) when it is the model's default strategy, so the
    /// load's compile phase covers it and the first generation starts at once. Strategies that
    /// copy the weights (the megakernels) build on first use only.
    fn build_at_load(&self) -> bool {
        false
    }

    /// What it tells the planner.
    fn pitch(&self, m: &Shared) -> Pitch;

    /// Whether a calibration should time it on this model (then it is prepared), else why
    /// not. Only asked of strategies that do not pitch `OptIn`.
    fn calibrates<'a>(
        &'a mut self,
        m: &'a Shared,
    ) -> LocalFuture<'a, std::result::Result<(), String>>;

    /// Compute dispatches of one decode step (greedy or sampling).
    fn dispatches_per_step(&self, m: &Shared, sampling: bool) -> Result<u32>;

    /// Its chunk policy: the `chunk_tokens` a timed generation of `new_tokens` tokens runs
    /// with (the bench and calibration) when `requested` is the caller's setting.
    fn timed_chunk(&self, requested: u32, new_tokens: u32) -> u32 {
        let _ = new_tokens;
        requested
    }

    /// Whether a timed generation's tokens all reach the host at its end (one dispatch): its
    /// decode speed is then its end-to-end speed, and an adapter's limit on one dispatch can
    /// stop it (a benchmark notes that rather than failing).
    fn one_dispatch(&self) -> bool {
        false
    }

    /// Whether it keeps a KV cache of its own (prefix reuse needs the same cache as the
    /// generation before).
    fn own_kv_cache(&self) -> bool {
        false
    }

    /// That cache once built: f32, per layer K then V, per KV head, `nCtx` rows of `head_dim`
    /// (the order of a saved session's rows, `model::session`).
    fn own_kv(&self) -> Option<&wgpu::Buffer> {
        None
    }

    /// Whether it follows a constraint (`Run::constraint`).
    fn constraints(&self) -> bool {
        false
    }

    /// Whether it reports log-probabilities (`Run::logprobs`).
    fn logprobs(&self) -> bool {
        false
    }

    /// Runs `run` (the prompt's KV rows before `run.start` are in its cache), handing each
    /// token to `on_token` as it reaches the host.
    fn generate<'a>(
        &'a mut self,
        m: &'a Shared,
        run: &'a Run<'a>,
        on_token: &'a mut dyn FnMut(u32) -> bool,
    ) -> LocalFuture<'a, Result<TokenGeneration>>;

    /// GPU bytes of what it built on first use (0 when nothing is built).
    fn bytes(&self) -> u64 {
        0
    }

    /// Frees what it built on first use; whether there was anything (its KV cache is then
    /// gone too).
    fn release(&mut self) -> bool {
        false
    }

    /// Workgroups of its dispatches, where it decides them at run time (once prepared).
    fn workgroups(&self) -> Option<u32> {
        None
    }

    /// Every dispatch of one decode step at `context` positions timed per kernel role (after a
    /// generation of it has run), where the strategy has such a step.
    fn profile<'a>(
        &'a self,
        m: &'a Shared,
        context: u32,
        reps: u32,
    ) -> LocalFuture<'a, Result<StepProfile>> {
        let _ = (m, context, reps);
        Box::pin(async {
            Err(FuselmError::InvalidArgument(
                "this strategy has no per-dispatch profile (fused has)".into(),
            ))
        })
    }
}

/// Clones a limit error kept from load time (FuselmError holds non-Clone sources); `None` for
/// other kinds.
pub(crate) fn replay_limit(e: &FuselmError) -> Option<FuselmError> {
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
