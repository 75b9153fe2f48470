//! Typed GGUF metadata: values, arrays, and an ordered key/value map with typed getters.
//!
//! Arrays are stored as typed vectors (`Vec<u8>`, `Vec<String>`, ...) rather than a
//! `Vec<MetadataValue>`: a vocabulary of 250k tokens or a hostile 100 MB `u8` array would
//! otherwise cost ~32 bytes per element. With typed storage memory stays within a small
//! constant factor of the file size.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::GgufError;

/// GGUF metadata value type ids (`gguf_type` in ggml).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u32)]
pub enum ValueType {
    U8 = 0,
    I8 = 1,
    U16 = 2,
    I16 = 3,
    U32 = 4,
    I32 = 5,
    F32 = 6,
    Bool = 7,
    String = 8,
    Array = 9,
    U64 = 10,
    I64 = 11,
    F64 = 12,
}

impl ValueType {
    pub fn from_id(id: u32) -> Option<ValueType> {
        use ValueType::*;
        [
            U8, I8, U16, I16, U32, I32, F32, Bool, String, Array, U64, I64, F64,
        ]
        .into_iter()
        .find(|t| *t as u32 == id)
    }

    /// Smallest encoding of one value of this type in bytes; used to bound counts
    /// by the bytes remaining before anything is allocated.
    pub(crate) fn min_size(self) -> u64 {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => 1,
            U16 | I16 => 2,
            U32 | I32 | F32 => 4,
            U64 | I64 | F64 | String => 8, // a string is at least its u64 length
            Array => 12,                   // u32 element type + u64 count
        }
    }

    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

/// One metadata value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetadataValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    F32(f32),
    Bool(bool),
    String(String),
    Array(MetadataArray),
    U64(u64),
    I64(i64),
    F64(f64),
}

/// A homogeneous metadata array. Nested arrays may each have their own element type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum MetadataArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    F32(Vec<f32>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<MetadataArray>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F64(Vec<f64>),
}

impl MetadataArray {
    pub fn elem_type(&self) -> ValueType {
        match self {
            MetadataArray::U8(_) => ValueType::U8,
            MetadataArray::I8(_) => ValueType::I8,
            MetadataArray::U16(_) => ValueType::U16,
            MetadataArray::I16(_) => ValueType::I16,
            MetadataArray::U32(_) => ValueType::U32,
            MetadataArray::I32(_) => ValueType::I32,
            MetadataArray::F32(_) => ValueType::F32,
            MetadataArray::Bool(_) => ValueType::Bool,
            MetadataArray::String(_) => ValueType::String,
            MetadataArray::Array(_) => ValueType::Array,
            MetadataArray::U64(_) => ValueType::U64,
            MetadataArray::I64(_) => ValueType::I64,
            MetadataArray::F64(_) => ValueType::F64,
        }
    }

    pub fn len(&self) -> usize {
        match self {
            MetadataArray::U8(v) => v.len(),
            MetadataArray::I8(v) => v.len(),
            MetadataArray::U16(v) => v.len(),
            MetadataArray::I16(v) => v.len(),
            MetadataArray::U32(v) => v.len(),
            MetadataArray::I32(v) => v.len(),
            MetadataArray::F32(v) => v.len(),
            MetadataArray::Bool(v) => v.len(),
            MetadataArray::String(v) => v.len(),
            MetadataArray::Array(v) => v.len(),
            MetadataArray::U64(v) => v.len(),
            MetadataArray::I64(v) => v.len(),
            MetadataArray::F64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl MetadataValue {
    pub fn value_type(&self) -> ValueType {
        match self {
            MetadataValue::U8(_) => ValueType::U8,
            MetadataValue::I8(_) => ValueType::I8,
            MetadataValue::U16(_) => ValueType::U16,
            MetadataValue::I16(_) => ValueType::I16,
            MetadataValue::U32(_) => ValueType::U32,
            MetadataValue::I32(_) => ValueType::I32,
            MetadataValue::F32(_) => ValueType::F32,
            MetadataValue::Bool(_) => ValueType::Bool,
            MetadataValue::String(_) => ValueType::String,
            MetadataValue::Array(_) => ValueType::Array,
            MetadataValue::U64(_) => ValueType::U64,
            MetadataValue::I64(_) => ValueType::I64,
            MetadataValue::F64(_) => ValueType::F64,
        }
    }

    /// Human-readable type, e.g. `u32` or `array<string>`, for error messages.
    pub fn type_description(&self) -> String {
        match self {
            MetadataValue::Array(a) => format!("array<{}>", a.elem_type().name()),
            v => v.value_type().name().to_string(),
        }
    }

    /// The value as an `i128` if it is an integer of any width (never for bool/float).
    fn as_int(&self) -> Option<i128> {
        Some(match *self {
            MetadataValue::U8(v) => v.into(),
            MetadataValue::I8(v) => v.into(),
            MetadataValue::U16(v) => v.into(),
            MetadataValue::I16(v) => v.into(),
            MetadataValue::U32(v) => v.into(),
            MetadataValue::I32(v) => v.into(),
            MetadataValue::U64(v) => v.into(),
            MetadataValue::I64(v) => v.into(),
            _ => return None,
        })
    }
}

/// Ordered metadata map: iteration follows file order; lookups go through an index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, MetadataValue)>,
    index: BTreeMap<String, usize>,
}

impl Metadata {
    pub fn new() -> Metadata {
        Metadata::default()
    }

    /// Appends a key; a duplicate key is an error (GGUF forbids them and readers disagree
    /// on which copy wins, so accepting one would be ambiguous).
    pub fn insert(&mut self, key: String, value: MetadataValue) -> Result<(), GgufError> {
        if self.index.contains_key(&key) {
            return Err(GgufError::DuplicateKey { key });
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        Ok(())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &MetadataValue)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.index
            .get(key)
            .and_then(|&i| self.entries.get(i))
            .map(|(_, v)| v)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    fn require(&self, key: &str) -> Result<&MetadataValue, GgufError> {
        self.get(key).ok_or_else(|| GgufError::MissingKey {
            key: key.to_string(),
        })
    }

    fn wrong(key: &str, expected: &'static str, v: &MetadataValue) -> GgufError {
        GgufError::WrongType {
            key: key.into(),
            expected,
            found: v.type_description(),
        }
    }

    /// Any integer type whose value fits in `T`; otherwise `WrongType` / `InvalidValue`.
    fn get_int<T: TryFrom<i128>>(&self, key: &str, expected: &'static str) -> Result<T, GgufError> {
        let v = self.require(key)?;
        let i = v.as_int().ok_or_else(|| Self::wrong(key, expected, v))?;
        T::try_from(i).map_err(|_| GgufError::InvalidValue {
            key: key.into(),
            reason: format!("{i} does not fit in {expected}"),
        })
    }

    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        self.get_int(key, "u32")
    }

    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        self.get_int(key, "u64")
    }

    pub fn get_i64(&self, key: &str) -> Result<i64, GgufError> {
        self.get_int(key, "i64")
    }

    /// An `f32`; an `f64` is accepted and narrowed (some writers store floats as f64).
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        match self.require(key)? {
            MetadataValue::F32(f) => Ok(*f),
            MetadataValue::F64(f) => Ok(*f as f32),
            v => Err(Self::wrong(key, "f32", v)),
        }
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        match self.require(key)? {
            MetadataValue::Bool(b) => Ok(*b),
            v => Err(Self::wrong(key, "bool", v)),
        }
    }

    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        match self.require(key)? {
            MetadataValue::String(s) => Ok(s),
            v => Err(Self::wrong(key, "string", v)),
        }
    }

    pub fn get_array(&self, key: &str) -> Result<&MetadataArray, GgufError> {
        match self.require(key)? {
            MetadataValue::Array(a) => Ok(a),
            v => Err(Self::wrong(key, "array", v)),
        }
    }

    pub fn get_str_array(&self, key: &str) -> Result<&[String], GgufError> {
        match self.require(key)? {
            MetadataValue::Array(MetadataArray::String(a)) => Ok(a),
            v => Err(Self::wrong(key, "array<string>", v)),
        }
    }

    pub fn get_f32_array(&self, key: &str) -> Result<&[f32], GgufError> {
        match self.require(key)? {
            MetadataValue::Array(MetadataArray::F32(a)) => Ok(a),
            v => Err(Self::wrong(key, "array<f32>", v)),
        }
    }

    pub fn get_i32_array(&self, key: &str) -> Result<&[i32], GgufError> {
        match self.require(key)? {
            MetadataValue::Array(MetadataArray::I32(a)) => Ok(a),
            v => Err(Self::wrong(key, "array<i32>", v)),
        }
    }

    /// `Ok(None)` when the key is absent, the typed result otherwise; for optional keys.
    pub fn opt<T>(
        &self,
        key: &str,
        get: impl FnOnce(&Self, &str) -> Result<T, GgufError>,
    ) -> Result<Option<T>, GgufError> {
        if self.contains(key) {
            get(self, key).map(Some)
        } else {
            Ok(None)
        }
    }
}
