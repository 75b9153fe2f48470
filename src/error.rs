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

    /// A load would pass the caller's `memoryBudget` (bytes the models of a device may hold):
    /// what it needs and what the budget leaves, with the parts of each.
    #[error("memoryBudget exceeded: needed {needed} bytes, available {available}: {detail}")]
    MemoryBudget {
        needed: u64,
        available: u64,
        detail: String,
    },

    /// A GPU operation failed (validation error, out of memory, lost device, failed map).
    #[error("GPU error: {0}")]
    Gpu(String),

    /// The model file is not a valid or supported GGUF (names the key, tensor or offset).
    #[error("model file: {0}")]
    Gguf(#[from] crate::gguf::GgufError),

    /// The model's vocabulary could not be turned into a tokenizer.
    #[error("tokenizer: {0}")]
    Tokenizer(#[from] crate::tokenizer::TokenizerError),

    /// The chat template failed to parse or render.
    #[error("chat template: {0}")]
    Template(#[from] crate::chat_template::TemplateError),

    /// A response format (JSON Schema, regex) that cannot be compiled: an unsupported keyword
    /// (named), an invalid pattern, or a bound exceeded.
    #[error("responseFormat: {0}")]
    Constraint(#[from] crate::constraint::ConstraintError),

    /// The model's logits were not finite (NaN or infinity) at `position` (the index in the
    /// sequence of the token being chosen): broken weights, or activations that overflowed.
    /// The generation stops there; the model stays usable.
    #[error(
        "numerical failure: the logits at position {position} are not finite (NaN or \
         infinity), after {generated} generated tokens; the model's weights or activations \
         overflowed"
    )]
    Numerical { position: u32, generated: u32 },

    /// The generation was aborted by the caller.
    #[error("generation aborted")]
    Aborted,

    /// Bad arguments from the caller.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The model is already generating; one generation runs at a time per model.
    #[error("busy: {0}")]
    Busy(String),

    /// The model's architecture needs an operation the GPU path does not implement yet
    /// (kind `invalid-model`).
    #[error("unsupported model: {0}")]
    UnsupportedModel(String),

    /// The model stores weights in a quantization type fuselm has no GPU kernel for.
    #[error("unsupported quantization: {0}")]
    UnsupportedQuant(String),

    /// The GPU device was lost (driver reset, `device.destroy()`, tab in background too long):
    /// this model is unusable; load it again.
    #[error("the GPU device was lost: {0}")]
    DeviceLost(String),

    /// A saved session (`loadSession`) that is damaged, not a session, or not for this model
    /// and load; or a session that cannot be saved now. The model stays usable.
    #[error("{0}")]
    Session(String),
}

/// The stable, machine-readable category of a [`FuselmError`]; in TypeScript, `FuselmError.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub enum ErrorKind {
    WebgpuUnavailable,
    NoAdapter,
    DeviceRequest,
    LimitExceeded,
    Gpu,
    InvalidModel,
    Tokenizer,
    Template,
    Constraint,
    /// Non-finite logits ([`FuselmError::Numerical`]).
    Numerical,
    Aborted,
    InvalidArgument,
    Busy,
    UnsupportedQuant,
    DeviceLost,
    /// A saved session that is damaged or belongs to another model or load
    /// ([`FuselmError::Session`]).
    Session,
    /// Fetching the model failed (raised by the TypeScript loader; listed here so the kind is one type).
    Network,
    /// The downloaded model could not be kept in the browser's cache (quota exceeded, storage
    /// unavailable); the load itself goes on (reported by the TypeScript loader in its progress).
    Cache,
}

impl ErrorKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::WebgpuUnavailable => "webgpu-unavailable",
            ErrorKind::NoAdapter => "no-adapter",
            ErrorKind::DeviceRequest => "device-request",
            ErrorKind::LimitExceeded => "limit-exceeded",
            ErrorKind::Gpu => "gpu",
            ErrorKind::InvalidModel => "invalid-model",
            ErrorKind::Tokenizer => "tokenizer",
            ErrorKind::Template => "template",
            ErrorKind::Constraint => "constraint",
            ErrorKind::Numerical => "numerical",
            ErrorKind::Aborted => "aborted",
            ErrorKind::InvalidArgument => "invalid-argument",
            ErrorKind::Busy => "busy",
            ErrorKind::UnsupportedQuant => "unsupported-quant",
            ErrorKind::DeviceLost => "device-lost",
            ErrorKind::Session => "session",
            ErrorKind::Network => "network",
            ErrorKind::Cache => "cache",
        }
    }
}

impl FuselmError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            FuselmError::WebGpuUnavailable { .. } => ErrorKind::WebgpuUnavailable,
            FuselmError::NoAdapter { .. } => ErrorKind::NoAdapter,
            FuselmError::DeviceRequest { .. } => ErrorKind::DeviceRequest,
            FuselmError::LimitExceeded { .. } | FuselmError::MemoryBudget { .. } => {
                ErrorKind::LimitExceeded
            }
            FuselmError::Gpu(_) => ErrorKind::Gpu,
            // A well-formed tensor of a type fuselm has no kernel for (IQ4_NL, Q8_K, …).
            FuselmError::Gguf(crate::gguf::GgufError::UnsupportedTensorType { .. }) => {
                ErrorKind::UnsupportedQuant
            }
            FuselmError::Gguf(_) => ErrorKind::InvalidModel,
            FuselmError::Tokenizer(_) => ErrorKind::Tokenizer,
            FuselmError::Template(_) => ErrorKind::Template,
            FuselmError::Constraint(_) => ErrorKind::Constraint,
            FuselmError::Numerical { .. } => ErrorKind::Numerical,
            FuselmError::Aborted => ErrorKind::Aborted,
            FuselmError::InvalidArgument(_) => ErrorKind::InvalidArgument,
            FuselmError::Busy(_) => ErrorKind::Busy,
            FuselmError::UnsupportedQuant(_) => ErrorKind::UnsupportedQuant,
            FuselmError::UnsupportedModel(_) => ErrorKind::InvalidModel,
            FuselmError::DeviceLost(_) => ErrorKind::DeviceLost,
            FuselmError::Session(_) => ErrorKind::Session,
        }
    }
}

pub type Result<T, E = FuselmError> = std::result::Result<T, E>;

// Native only: serde_json is a native dependency, and the names do not depend on the target.
#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::ErrorKind;

    #[test]
    fn kind_strings_match_serde_names() {
        for kind in [
            ErrorKind::WebgpuUnavailable,
            ErrorKind::NoAdapter,
            ErrorKind::DeviceRequest,
            ErrorKind::LimitExceeded,
            ErrorKind::Gpu,
            ErrorKind::InvalidModel,
            ErrorKind::Tokenizer,
            ErrorKind::Template,
            ErrorKind::Constraint,
            ErrorKind::Numerical,
            ErrorKind::Aborted,
            ErrorKind::InvalidArgument,
            ErrorKind::Busy,
            ErrorKind::UnsupportedQuant,
            ErrorKind::DeviceLost,
            ErrorKind::Session,
            ErrorKind::Network,
        ] {
            let json = serde_json::to_string(&kind).unwrap_or_default();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
    }
}
