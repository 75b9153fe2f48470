//! GGUF v3 writer, used by tests, fixtures and the synthetic-model generator.
//!
//! It deliberately validates nothing (duplicate keys, wrong data sizes, odd type ids are all
//! written as given) so tests can also build broken files with it; run the result through
//! [`super::Gguf::parse`] to validate. Tensor data offsets are assigned in insertion order,
//! each rounded up to the alignment, exactly as llama.cpp's `gguf_write` lays them out.

use super::metadata::{MetadataArray, MetadataValue, ValueType};
use super::reader::DEFAULT_ALIGNMENT;
use super::tensor_type::GgmlType;

struct PendingTensor {
    name: String,
    dims: Vec<u64>,
    type_id: u32,
    data: Vec<u8>,
}

/// Builds GGUF bytes in memory.
pub struct GgufWriter {
    version: u32,
    alignment: u64,
    metadata: Vec<(String, MetadataValue)>,
    tensors: Vec<PendingTensor>,
}

impl Default for GgufWriter {
    fn default() -> Self {
        GgufWriter::new()
    }
}

impl GgufWriter {
    pub fn new() -> GgufWriter {
        GgufWriter {
            version: 3,
            alignment: DEFAULT_ALIGNMENT,
            metadata: Vec::new(),
            tensors: Vec::new(),
        }
    }

    /// Header version to write (default 3; 2 has the identical little-endian layout).
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Data alignment used for padding. A non-default value should also be recorded as
    /// `general.alignment` (u32), which this method adds.
    pub fn alignment(mut self, alignment: u64) -> Self {
        self.alignment = alignment.max(1);
        self.metadata.push((
            "general.alignment".into(),
            MetadataValue::U32(alignment as u32),
        ));
        self
    }

    /// Appends a metadata entry (any type, including nested arrays).
    pub fn add(&mut self, key: &str, value: MetadataValue) -> &mut Self {
        self.metadata.push((key.to_string(), value));
        self
    }

    pub fn add_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.add(key, MetadataValue::U32(v))
    }

    pub fn add_f32(&mut self, key: &str, v: f32) -> &mut Self {
        self.add(key, MetadataValue::F32(v))
    }

    pub fn add_str(&mut self, key: &str, v: &str) -> &mut Self {
        self.add(key, MetadataValue::String(v.to_string()))
    }

    pub fn add_str_array(&mut self, key: &str, v: &[&str]) -> &mut Self {
        self.add(
            key,
            MetadataValue::Array(MetadataArray::String(
                v.iter().map(|s| s.to_string()).collect(),
            )),
        )
    }

    /// Appends a tensor of a supported type; `dims` in ggml order, `data` its raw bytes.
    pub fn add_tensor(
        &mut self,
        name: &str,
        dims: &[u64],
        ty: GgmlType,
        data: Vec<u8>,
    ) -> &mut Self {
        self.add_tensor_raw(name, dims, ty.id(), data)
    }

    /// Appends an F32 tensor from values.
    pub fn add_tensor_f32(&mut self, name: &str, dims: &[u64], values: &[f32]) -> &mut Self {
        let data = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        self.add_tensor_raw(name, dims, GgmlType::F32.id(), data)
    }

    /// Appends a tensor with any raw ggml type id (for unsupported-type and broken files).
    pub fn add_tensor_raw(
        &mut self,
        name: &str,
        dims: &[u64],
        type_id: u32,
        data: Vec<u8>,
    ) -> &mut Self {
        self.tensors.push(PendingTensor {
            name: name.to_string(),
            dims: dims.to_vec(),
            type_id,
            data,
        });
        self
    }

    /// Serializes the file.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(b"GGUF");
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            write_str(&mut out, k);
            out.extend_from_slice(&(v.value_type() as u32).to_le_bytes());
            write_value(&mut out, v);
        }
        let mut offset = 0u64;
        for t in &self.tensors {
            write_str(&mut out, &t.name);
            out.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                out.extend_from_slice(&d.to_le_bytes());
            }
            out.extend_from_slice(&t.type_id.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
            offset = (offset + t.data.len() as u64).next_multiple_of(self.alignment);
        }
        for t in &self.tensors {
            pad_to(&mut out, self.alignment);
            out.extend_from_slice(&t.data);
        }
        out
    }
}

fn pad_to(out: &mut Vec<u8>, alignment: u64) {
    let len = (out.len() as u64).next_multiple_of(alignment);
    out.resize(len as usize, 0);
}

fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn write_value(out: &mut Vec<u8>, v: &MetadataValue) {
    match v {
        MetadataValue::U8(x) => out.push(*x),
        MetadataValue::I8(x) => out.push(*x as u8),
        MetadataValue::U16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::I16(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::U32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::I32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::F32(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::Bool(x) => out.push(u8::from(*x)),
        MetadataValue::String(s) => write_str(out, s),
        MetadataValue::Array(a) => write_array(out, a),
        MetadataValue::U64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::I64(x) => out.extend_from_slice(&x.to_le_bytes()),
        MetadataValue::F64(x) => out.extend_from_slice(&x.to_le_bytes()),
    }
}

fn write_array(out: &mut Vec<u8>, a: &MetadataArray) {
    fn each<T>(out: &mut Vec<u8>, v: &[T], f: impl Fn(&mut Vec<u8>, &T)) {
        out.extend_from_slice(&(v.len() as u64).to_le_bytes());
        v.iter().for_each(|x| f(out, x));
    }
    let elem: ValueType = a.elem_type();
    out.extend_from_slice(&(elem as u32).to_le_bytes());
    match a {
        MetadataArray::U8(v) => each(out, v, |o, x| o.push(*x)),
        MetadataArray::I8(v) => each(out, v, |o, x| o.push(*x as u8)),
        MetadataArray::U16(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        MetadataArray::I16(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        MetadataArray::U32(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        MetadataArray::I32(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        MetadataArray::F32(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        MetadataArray::Bool(v) => each(out, v, |o, x| o.push(u8::from(*x))),
        MetadataArray::String(v) => each(out, v, |o, x| write_str(o, x)),
        MetadataArray::Array(v) => each(out, v, write_array),
        MetadataArray::U64(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        MetadataArray::I64(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
        MetadataArray::F64(v) => each(out, v, |o, x| o.extend_from_slice(&x.to_le_bytes())),
    }
}
