//! Hardened GGUF reader, dequantizers, model description and writer.
//!
//! Pure Rust, no I/O, no threads, no panics on any input: this module parses bytes the
//! caller obtained however it likes (a `fetch` in the browser, a file natively), so it
//! compiles unchanged for wasm32 and native.
//!
//! # Reading
//! * [`Gguf::parse`]`(&file)` parses a whole file in memory: header (v2/v3), typed
//!   [`Metadata`], and a validated tensor directory ([`TensorInfo`]: name, ggml-order
//!   `dims`, type, absolute `offset`, `size_bytes`). [`Gguf::tensor_data`] slices a tensor.
//! * [`Gguf::parse_header`]`(&prefix)` parses from the start of a file; `Ok(None)` = need
//!   more bytes.
//! * [`GgufStreamReader`] takes download chunks via `push` and emits [`StreamEvent::Header`]
//!   then one [`StreamEvent::Tensor`] per tensor (in file-offset order) as soon as each is
//!   complete, holding at most the tensor being filled; `finish` reports truncation.
//!   The header is buffered until parsed (capped by [`DEFAULT_MAX_HEADER_BYTES`]) and is
//!   reported at most ~1.5x its size late (re-parse attempts grow geometrically). Data the
//!   whole-file parse reports as `TensorDataPastEnd` shows up in a stream as `Truncated`.
//!
//! # Validation
//! Every inconsistency is a distinct [`GgufError`] variant: bad magic, unsupported version
//! (v1, big-endian), truncation, lengths/counts exceeding the remaining bytes (checked
//! before allocating), unknown metadata types, invalid bools, array nesting deeper than
//! [`MAX_ARRAY_DEPTH`], duplicate keys and tensor names, bad `general.alignment`, 0 or >4
//! dims, zero dims, element/byte counts overflowing, rows not a whole number of blocks,
//! misaligned, overlapping or out-of-file tensor data.
//!
//! # Tensor types
//! [`GgmlType`] lists the types this crate decodes: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0,
//! Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K. Other ggml types with a known block layout (Q8_K, IQ4_XS, ...) still
//! parse, so a
//! header can be inspected; their `TensorInfo::ty` is `None` and
//! [`TensorInfo::ggml_type`] / [`dequantize_tensor`] / [`ModelConfig::from_gguf`] fail with
//! `UnsupportedTensorType`. Type ids with no known layout cannot be sized and fail the parse
//! with `UnknownTensorType`.
//!
//! # Dequantizing, model description, writing
//! * [`dequantize`], [`dequantize_row_into`], [`dequantize_tensor`]: CPU reference,
//!   bit-exact with ggml.
//! * [`ModelConfig::from_gguf`]: llama/qwen2/qwen3/gemma3 hyper-parameters, checked against the tensors.
//! * [`GgufWriter`] and [`quantize_q8_0`] / [`quantize_q4_0`] / [`quantize_q4_1`]: build
//!   GGUF files for tests and synthetic models. The writer validates nothing, so tests can
//!   also build broken files with it.
//!
//! Memory: nothing is allocated from a declared length or count before the bytes backing it
//! are known to exist; arrays are stored typed (`Vec<u8>`, `Vec<String>`, ...), so metadata
//! costs a small constant factor of its size in the file.

mod cursor;
mod dequant;
mod error;
mod f16;
mod metadata;
mod model_config;
mod quantize;
mod reader;
mod stream;
mod tensor_type;
mod writer;

pub use dequant::{dequantize, dequantize_row_into, dequantize_tensor, q3_k_scale, scale_min_k4};
pub use error::GgufError;
pub use f16::{bf16_to_f32, f16_to_f32, f32_to_f16};
pub use metadata::{Metadata, MetadataArray, MetadataValue, ValueType};
pub use model_config::{
    layer_tensor, FfnActivation, ModelConfig, RopeScaling, RopeStyle, SlidingWindow, FUSED_QKV,
    LAYER_TENSORS, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT, ROPE_FREQS,
};
pub use quantize::{
    quantize_bf16, quantize_q2_k, quantize_q3_k, quantize_q4_0, quantize_q4_1, quantize_q4_k,
    quantize_q5_0, quantize_q5_1, quantize_q5_k, quantize_q6_k, quantize_q8_0,
};
pub use reader::{
    Gguf, TensorInfo, DEFAULT_ALIGNMENT, DEFAULT_MAX_HEADER_BYTES, MAX_ARRAY_DEPTH, MAX_DIMS,
    MAX_TENSOR_NAME,
};
pub use stream::{GgufStreamReader, StreamEvent};
pub use tensor_type::{type_name, GgmlType, QK_K};
pub use writer::GgufWriter;
