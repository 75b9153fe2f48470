//! GPU plumbing shared by every kernel: adapter/device acquisition, buffer readback, waiting.

mod context;
#[cfg(not(target_arch = "wasm32"))]
pub mod loop_proof;
mod readback;
mod sync;

pub use context::{
    request_adapter, request_adapter_with, ContextOptions, GpuContext, BACKENDS, OPTIONAL_FEATURES,
};
pub(crate) use readback::map_read;
pub use readback::{read_buffer, StagedRead, StagingPool};
pub use sync::wait_idle;
