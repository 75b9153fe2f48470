//! The one error type of the GGUF module.
//!
//! Every way a file can be wrong gets its own variant, carrying the byte offset or the
//! numbers involved, so that a user who feeds us a broken or hostile download gets a message
//! that says what is wrong and where, and tests can assert on the exact failure.

use thiserror::Error;

/// Everything that can go wrong while reading, validating or dequantizing a GGUF file.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum GgufError {
    // ---- container / header ----
    #[error(
        "not a GGUF file: expected magic \"GGUF\" at offset 0, found {found:02x?}{}",
        magic_hint(found)
    )]
    BadMagic { found: [u8; 4] },
    #[error("unsupported GGUF version {version} (supported: 2 and 3, little-endian){}",
        if version.swap_bytes() == 2 || version.swap_bytes() == 3 { "; this looks like a big-endian file" } else { "" })]
    UnsupportedVersion { version: u32 },
    #[error("file truncated at offset {offset}: reading {what} needs {needed} bytes, only {available} left")]
    Truncated {
        offset: u64,
        what: &'static str,
        needed: u64,
        available: u64,
    },
    #[error(
        "{what} at offset {offset} declares length {len}, but only {available} bytes can follow"
    )]
    LengthPastEnd {
        what: &'static str,
        offset: u64,
        len: u64,
        available: u64,
    },
    #[error("{what} count {count} at offset {offset} is impossible: at most {max} fit in the remaining bytes")]
    CountTooLarge {
        what: &'static str,
        offset: u64,
        count: u64,
        max: u64,
    },
    #[error("header is larger than the limit of {limit} bytes")]
    HeaderTooLarge { limit: u64 },
    #[error("invalid UTF-8 in {what} at offset {offset}")]
    InvalidUtf8 { what: &'static str, offset: u64 },

    // ---- metadata ----
    #[error("unknown metadata value type {type_id} at offset {offset}")]
    UnknownValueType { type_id: u32, offset: u64 },
    #[error("invalid bool byte {value} at offset {offset} (must be 0 or 1)")]
    InvalidBool { value: u8, offset: u64 },
    #[error("metadata arrays nested deeper than {max_depth} levels at offset {offset}")]
    ArrayTooDeep { offset: u64, max_depth: u32 },
    #[error("duplicate metadata key \"{key}\"")]
    DuplicateKey { key: String },
    #[error("metadata key \"{key}\" is missing")]
    MissingKey { key: String },
    #[error("metadata key \"{key}\" has type {found}, expected {expected}")]
    WrongType {
        key: String,
        expected: &'static str,
        found: String,
    },
    #[error("metadata key \"{key}\" has an invalid value: {reason}")]
    InvalidValue { key: String, reason: String },
    #[error("general.alignment {value} is not a nonzero power of two")]
    InvalidAlignment { value: u64 },

    // ---- tensor directory ----
    #[error("tensor \"{name}\" has unknown ggml type id {type_id}; its size cannot be computed")]
    UnknownTensorType { name: String, type_id: u32 },
    #[error(
        "tensor \"{name}\" is {} (ggml type id {type_id}), which fuselm cannot dequantize or upload",
        super::tensor_type::type_name(*.type_id).unwrap_or("of an unknown type")
    )]
    UnsupportedTensorType { name: String, type_id: u32 },
    #[error("tensor name \"{name}\" is {len} bytes; ggml allows at most 63")]
    TensorNameTooLong { name: String, len: u64 },
    #[error("tensor \"{name}\" has {n_dims} dimensions; ggml allows 1 to 4")]
    BadDimCount { name: String, n_dims: u32 },
    #[error("tensor \"{name}\" has zero length in dimension {axis}")]
    ZeroDimension { name: String, axis: usize },
    #[error("tensor \"{name}\" dimensions {dims:?} overflow a 64-bit element or byte count")]
    DimsOverflow { name: String, dims: Vec<u64> },
    #[error("tensor \"{name}\" row length {row_len} is not a multiple of its type's block length {block_len}")]
    RowNotBlockMultiple {
        name: String,
        row_len: u64,
        block_len: u64,
    },
    #[error("duplicate tensor name \"{name}\"")]
    DuplicateTensorName { name: String },
    #[error(
        "tensor \"{name}\" data offset {offset} is not a multiple of the alignment {alignment}"
    )]
    MisalignedTensor {
        name: String,
        offset: u64,
        alignment: u64,
    },
    #[error("tensors \"{first}\" (ends at data offset {first_end}) and \"{second}\" (starts at {second_start}) overlap")]
    OverlappingTensors {
        first: String,
        first_end: u64,
        second: String,
        second_start: u64,
    },
    #[error("tensor \"{name}\" is {size_bytes} bytes, more than this platform can hold in memory")]
    TensorTooLarge { name: String, size_bytes: u64 },
    #[error("tensor \"{name}\" data offset {offset} overflows a 64-bit file position")]
    OffsetOverflow { name: String, offset: u64 },
    #[error(
        "tensor \"{name}\" data [{start}, {end}) lies past the end of the file ({file_len} bytes)"
    )]
    TensorDataPastEnd {
        name: String,
        start: u64,
        end: u64,
        file_len: u64,
    },

    // ---- dequantization ----
    #[error("{n_elements} elements of {ty} need {expected} bytes, got {found}")]
    DataSizeMismatch {
        ty: &'static str,
        n_elements: u64,
        expected: u64,
        found: u64,
    },
    #[error("{n_elements} elements is not a multiple of the {ty} block length {block_len}")]
    NotBlockMultiple {
        ty: &'static str,
        n_elements: u64,
        block_len: u64,
    },

    // ---- model description ----
    #[error(
        "general.architecture \"{arch}\" is not supported (supported: llama, qwen2, qwen3, gemma3)"
    )]
    UnsupportedArchitecture { arch: String },
    #[error("tensor \"{name}\" is missing")]
    MissingTensor { name: String },
    #[error("tensor \"{name}\" has shape {found:?}, expected {expected:?}")]
    TensorShape {
        name: String,
        expected: Vec<u64>,
        found: Vec<u64>,
    },
}

/// What a file that is not GGUF looks like, when it is something a server commonly answers with.
fn magic_hint(found: &[u8; 4]) -> &'static str {
    let lower = found.to_ascii_lowercase();
    if [&b"<!do"[..], b"<htm", b"<!--", b"<hea", b"<bod"].contains(&&lower[..]) {
        "; the server returned an HTML page, not a GGUF file (a wrong URL answered with index.html?)"
    } else if found[0] == b'{' || found[0] == b'[' {
        "; this looks like JSON (an error response?), not a GGUF file"
    } else if &lower == b"<?xm" {
        "; this is XML (an error response?), not a GGUF file"
    } else {
        ""
    }
}
