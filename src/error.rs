//! The crate's error type. Every failure a user must handle is one variant carrying the numbers
//! needed to act on it; the JS facade maps each variant to a stable `kind` string.

use thiserror::Error;

/// Anything that can go wrong in fuselm.
#[derive(Debug, Error)]
pub enum FuselmError {
    /// The environment has no WebGPU at all (`navigator.gpu` missing) or no usable native backend.
    #[error("WebGPU is not available: {reason}")]
    WebGpuUnavailable { reason: String },

    /// WebGPU exists but no adapter was returned (blocklisted GPU, headless without flags, …).
    #[error("no GPU adapter found: {reason}")]
    NoAdapter { reason: String },

    /// The adapter refused to create a device with the features/limits we asked for.
    #[error("could not create a GPU device: {reason}")]
    DeviceRequest { reason: String },

    /// A buffer, binding or workgroup need exceeds what the adapter allows.
    #[error("{limit} exceeded: needed {needed}, available {available}")]
    LimitExceeded {
        limit: &'static str,
        needed: u64,
        available: u64,
    },

    /// A GPU operation failed (validation error, out of memory, lost device, failed map).
    #[error("GPU error: {0}")]
    Gpu(String),

    /// Bad arguments from the caller.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl FuselmError {
    /// A stable, machine-readable name for the variant; the JS layer exposes it as `error.kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            FuselmError::WebGpuUnavailable { .. } => "webgpu-unavailable",
            FuselmError::NoAdapter { .. } => "no-adapter",
            FuselmError::DeviceRequest { .. } => "device-request",
            FuselmError::LimitExceeded { .. } => "limit-exceeded",
            FuselmError::Gpu(_) => "gpu",
            FuselmError::InvalidArgument(_) => "invalid-argument",
        }
    }
}

pub type Result<T, E = FuselmError> = std::result::Result<T, E>;
