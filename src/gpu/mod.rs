//! GPU plumbing shared by every kernel: adapter/device acquisition, buffer readback, waiting.

mod context;
#[cfg(not(target_arch = "wasm32"))]
pub mod loop_proof;

/// The loop proofs (`loop_proof`, native) assume every `u32` a kernel reads from a uniform
/// buffer as a loop bound is below this; the model loader refuses shapes at or above it
/// (`model::shared::check_fit`), and the kernels' other loop parameters are positions below
/// `n_ctx` or counts derived from the vocabulary.
pub const LOOP_PARAM_LIMIT: u64 = 1 << 31;
mod readback;
mod sync;

pub use context::{
    request_adapter, request_adapter_with, CachedPipeline, ContextOptions, GpuContext, PipelineKey,
    BACKENDS, OPTIONAL_FEATURES,
};
pub(crate) use readback::map_read;
pub use readback::{read_buffer, StagedRead, StagingPool};
pub use sync::{wait_idle, Submitted};
