//! GGUF v2/v3 parser: header, typed metadata and a validated tensor directory.
//!
//! Layout (little-endian): magic "GGUF", u32 version, u64 tensor count, u64 kv count,
//! kv pairs (string key, u32 type, value), tensor infos (string name, u32 n_dims,
//! n_dims x u64 dims, u32 ggml type, u64 offset), padding to `general.alignment`, data.
//! v1 used 32-bit counts and is rejected; v2 and v3 are identical for little-endian files.
//!
//! Everything a later stage relies on is validated here once (sizes, alignment, overlap,
//! duplicate names), so consumers can index tensor data without re-checking.

use std::collections::BTreeMap;

use super::cursor::Cursor;
use super::error::GgufError;
use super::metadata::{Metadata, MetadataArray, MetadataValue, ValueType};
use super::tensor_type::{layout, GgmlType};

/// Default `general.alignment` when the key is absent.
pub const DEFAULT_ALIGNMENT: u64 = 32;
/// ggml's `GGML_MAX_DIMS`.
pub const MAX_DIMS: u32 = 4;
/// ggml's `GGML_MAX_NAME` (including the NUL terminator ggml stores).
pub const MAX_TENSOR_NAME: u64 = 64;
/// Nesting cap for arrays of arrays; real files use at most 2, a bomb would recurse deep.
pub const MAX_ARRAY_DEPTH: u32 = 8;
/// Default cap on header + directory size for prefix/stream parsing (real headers with a
/// 256k-token vocabulary are ~10 MB).
pub const DEFAULT_MAX_HEADER_BYTES: u64 = 256 << 20;

/// One entry of the tensor directory, validated.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TensorInfo {
    pub name: String,
    /// ggml order: `dims[0]` is the contiguous (row) length.
    pub dims: Vec<u64>,
    /// Raw ggml type id as stored in the file.
    pub type_id: u32,
    /// `Some` when the type is one this crate can dequantize (see [`TensorInfo::ggml_type`]).
    pub ty: Option<GgmlType>,
    /// Absolute byte offset of the data in the file (data section start + relative offset).
    pub offset: u64,
    pub size_bytes: u64,
    pub n_elements: u64,
}

impl TensorInfo {
    /// The tensor's type, or `UnsupportedTensorType` for a known-layout type we cannot decode.
    pub fn ggml_type(&self) -> Result<GgmlType, GgufError> {
        self.ty.ok_or_else(|| GgufError::UnsupportedTensorType {
            name: self.name.clone(),
            type_id: self.type_id,
        })
    }

    /// Number of rows (product of all dims but the first).
    pub fn n_rows(&self) -> u64 {
        self.dims.iter().skip(1).product()
    }
}

/// A parsed GGUF header + tensor directory. Holds no tensor data.
#[derive(Debug, Clone, PartialEq)]
pub struct Gguf {
    pub version: u32,
    pub alignment: u64,
    /// Absolute offset of the data section (end of the directory rounded up to `alignment`).
    pub data_offset: u64,
    /// Absolute offset where the tensor directory ends (before padding).
    pub header_len: u64,
    metadata: Metadata,
    tensors: Vec<TensorInfo>,
    by_name: BTreeMap<String, usize>,
}

impl Gguf {
    /// Parses a whole file held in memory and checks every tensor's data lies inside it.
    pub fn parse(bytes: &[u8]) -> Result<Gguf, GgufError> {
        let g = parse_with(&mut Cursor::complete(bytes))?;
        let file_len = bytes.len() as u64;
        for t in &g.tensors {
            check_in_file(t, file_len)?;
        }
        Ok(g)
    }

    /// Parses the header and directory from the start of a file. `Ok(None)` means the
    /// prefix ends inside the header: call again with more bytes. On success returns the
    /// header and `data_offset` as a `usize` (where tensor data starts). Tensor data bounds
    /// are not checked (the file length is unknown); [`Gguf::tensor_data`] checks them.
    pub fn parse_header(prefix: &[u8]) -> Result<Option<(Gguf, usize)>, GgufError> {
        Self::parse_header_with_limit(prefix, DEFAULT_MAX_HEADER_BYTES)
    }

    /// [`Gguf::parse_header`] with an explicit cap on the header size: declared lengths that
    /// would push the header past `max_header_bytes` fail with `HeaderTooLarge` / `LengthPastEnd`.
    pub fn parse_header_with_limit(
        prefix: &[u8],
        max_header_bytes: u64,
    ) -> Result<Option<(Gguf, usize)>, GgufError> {
        match parse_prefix(prefix, max_header_bytes)? {
            Ok(g) => match usize::try_from(g.data_offset) {
                Ok(off) => Ok(Some((g, off))),
                // Only on 32-bit targets, with a huge `general.alignment`.
                Err(_) => Err(GgufError::HeaderTooLarge {
                    limit: usize::MAX as u64,
                }),
            },
            Err(_) => Ok(None),
        }
    }

    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// Tensors in directory order.
    pub fn tensors(&self) -> &[TensorInfo] {
        &self.tensors
    }

    pub fn tensor(&self, name: &str) -> Option<&TensorInfo> {
        self.by_name.get(name).and_then(|&i| self.tensors.get(i))
    }

    /// Directory index of a tensor by name.
    pub fn tensor_index(&self, name: &str) -> Option<usize> {
        self.by_name.get(name).copied()
    }

    /// The bytes of `t` inside `file` (the whole file), bounds-checked.
    pub fn tensor_data<'a>(&self, file: &'a [u8], t: &TensorInfo) -> Result<&'a [u8], GgufError> {
        check_in_file(t, file.len() as u64)?;
        // check_in_file proved offset + size <= file.len(), so both fit in usize.
        Ok(&file[t.offset as usize..(t.offset + t.size_bytes) as usize])
    }

    /// Directory indices sorted by data offset (the order a download delivers tensors in).
    pub fn tensors_by_offset(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.tensors.len()).collect();
        order.sort_by_key(|&i| self.tensors[i].offset);
        order
    }
}

/// Prefix parse for the stream reader: `Ok(Err(needed_end))` means the header continues past
/// `prefix` and at least `needed_end` bytes are needed before it can be parsed. The data
/// section may start far past the header (a large `general.alignment` is legal): that
/// padding is never buffered, so `data_offset` is not held to the header limit.
pub(crate) fn parse_prefix(
    prefix: &[u8],
    max_header_bytes: u64,
) -> Result<Result<Gguf, u64>, GgufError> {
    match parse_with(&mut Cursor::prefix(prefix, max_header_bytes)) {
        Ok(g) => Ok(Ok(g)),
        Err(GgufError::Truncated { offset, needed, .. }) => Ok(Err(offset.saturating_add(needed))),
        Err(e) => Err(e),
    }
}

fn check_in_file(t: &TensorInfo, file_len: u64) -> Result<(), GgufError> {
    match t.offset.checked_add(t.size_bytes) {
        Some(end) if end <= file_len => Ok(()),
        end => Err(GgufError::TensorDataPastEnd {
            name: t.name.clone(),
            start: t.offset,
            end: end.unwrap_or(u64::MAX),
            file_len,
        }),
    }
}

/// Bytes the smallest possible kv pair takes: empty key (u64 len) + u32 type + 1-byte value.
const MIN_KV_BYTES: u64 = 8 + 4 + 1;
/// Smallest tensor info: name len + n_dims + one dim + type + offset.
const MIN_TENSOR_INFO_BYTES: u64 = 8 + 4 + 8 + 4 + 8;

fn parse_with(c: &mut Cursor<'_>) -> Result<Gguf, GgufError> {
    let magic: [u8; 4] = c.take(4, "magic")?.try_into().unwrap_or([0; 4]);
    if &magic != b"GGUF" {
        return Err(GgufError::BadMagic { found: magic });
    }
    let version = c.u32("version")?;
    if version != 2 && version != 3 {
        return Err(GgufError::UnsupportedVersion { version });
    }
    let off = c.pos();
    let n_tensors = c.u64("tensor count")?;
    let n_kv = c.u64("metadata count")?;
    c.check_count(n_kv, MIN_KV_BYTES, off + 8, "metadata entry")?;
    // Each tensor needs a directory entry; metadata still to come needs at least n_kv bytes.
    c.check_count(n_tensors, MIN_TENSOR_INFO_BYTES, off, "tensor info")?;

    let mut metadata = Metadata::new();
    for _ in 0..n_kv {
        let key = c.string("metadata key")?;
        let value = read_value(c, 0)?;
        metadata.insert(key, value)?;
    }

    let alignment = match metadata.get("general.alignment") {
        None => DEFAULT_ALIGNMENT,
        Some(_) => metadata.get_u64("general.alignment")?,
    };
    if alignment == 0 || !alignment.is_power_of_two() || alignment > u32::MAX as u64 {
        return Err(GgufError::InvalidAlignment { value: alignment });
    }

    let mut tensors = Vec::with_capacity(c.capacity_for(n_tensors, MIN_TENSOR_INFO_BYTES));
    let mut by_name = BTreeMap::new();
    for i in 0..n_tensors {
        let t = read_tensor_info(c, alignment)?;
        if by_name.insert(t.name.clone(), i as usize).is_some() {
            return Err(GgufError::DuplicateTensorName { name: t.name });
        }
        tensors.push(t);
    }

    let header_len = c.pos();
    // alignment <= 2^32 and header_len < 2^63 in practice; checked anyway.
    let data_offset = header_len
        .checked_next_multiple_of(alignment)
        .ok_or(GgufError::InvalidAlignment { value: alignment })?;
    for t in &mut tensors {
        // `offset` still holds the relative offset here.
        let abs = data_offset
            .checked_add(t.offset)
            .filter(|a| a.checked_add(t.size_bytes).is_some());
        t.offset = abs.ok_or_else(|| GgufError::OffsetOverflow {
            name: t.name.clone(),
            offset: t.offset,
        })?;
    }
    check_overlaps(&tensors)?;
    Ok(Gguf {
        version,
        alignment,
        data_offset,
        header_len,
        metadata,
        tensors,
        by_name,
    })
}

fn read_tensor_info(c: &mut Cursor<'_>, alignment: u64) -> Result<TensorInfo, GgufError> {
    let name = c.string("tensor name")?;
    if name.len() as u64 >= MAX_TENSOR_NAME {
        let len = name.len() as u64;
        return Err(GgufError::TensorNameTooLong { name, len });
    }
    let n_dims = c.u32("tensor dimension count")?;
    if n_dims == 0 || n_dims > MAX_DIMS {
        return Err(GgufError::BadDimCount { name, n_dims });
    }
    let mut dims = Vec::with_capacity(n_dims as usize);
    for axis in 0..n_dims as usize {
        let d = c.u64("tensor dimension")?;
        if d == 0 {
            return Err(GgufError::ZeroDimension { name, axis });
        }
        dims.push(d);
    }
    let type_id = c.u32("tensor type")?;
    let offset = c.u64("tensor offset")?;

    let Some((block_len, _)) = layout(type_id) else {
        return Err(GgufError::UnknownTensorType { name, type_id });
    };
    // ggml keeps byte counts in i64/size_t; require the element count to fit in i64.
    let n_elements = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(d))
        .filter(|&n| n <= i64::MAX as u64);
    let Some(n_elements) = n_elements else {
        return Err(GgufError::DimsOverflow { name, dims });
    };
    if dims[0] % block_len != 0 {
        return Err(GgufError::RowNotBlockMultiple {
            name,
            row_len: dims[0],
            block_len,
        });
    }
    let Some(size_bytes) =
        super::tensor_type::bytes_for(type_id, n_elements).filter(|&b| b <= i64::MAX as u64)
    else {
        return Err(GgufError::DimsOverflow { name, dims });
    };
    if offset % alignment != 0 {
        return Err(GgufError::MisalignedTensor {
            name,
            offset,
            alignment,
        });
    }
    Ok(TensorInfo {
        name,
        dims,
        type_id,
        ty: GgmlType::from_id(type_id),
        offset,
        size_bytes,
        n_elements,
    })
}

fn check_overlaps(tensors: &[TensorInfo]) -> Result<(), GgufError> {
    let mut order: Vec<&TensorInfo> = tensors.iter().collect();
    order.sort_by_key(|t| t.offset);
    for pair in order.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let a_end = a.offset + a.size_bytes; // overflow excluded in parse_with
        if a_end > b.offset {
            return Err(GgufError::OverlappingTensors {
                first: a.name.clone(),
                first_end: a_end,
                second: b.name.clone(),
                second_start: b.offset,
            });
        }
    }
    Ok(())
}

fn read_value(c: &mut Cursor<'_>, depth: u32) -> Result<MetadataValue, GgufError> {
    let off = c.pos();
    let type_id = c.u32("metadata value type")?;
    let ty = ValueType::from_id(type_id).ok_or(GgufError::UnknownValueType {
        type_id,
        offset: off,
    })?;
    read_typed(c, ty, depth)
}

fn read_typed(c: &mut Cursor<'_>, ty: ValueType, depth: u32) -> Result<MetadataValue, GgufError> {
    Ok(match ty {
        ValueType::String => MetadataValue::String(c.string("metadata string")?),
        ValueType::Array => MetadataValue::Array(read_array(c, depth + 1)?),
        ValueType::Bool => {
            let off = c.pos();
            MetadataValue::Bool(bool_from(c.u8("bool")?, off)?)
        }
        ValueType::U8 => MetadataValue::U8(c.u8("u8")?),
        ValueType::I8 => MetadataValue::I8(c.u8("i8")? as i8),
        ValueType::U16 => MetadataValue::U16(u16::from_le_bytes(c.array("u16")?)),
        ValueType::I16 => MetadataValue::I16(i16::from_le_bytes(c.array("i16")?)),
        ValueType::U32 => MetadataValue::U32(c.u32("u32")?),
        ValueType::I32 => MetadataValue::I32(i32::from_le_bytes(c.array("i32")?)),
        ValueType::F32 => MetadataValue::F32(f32::from_le_bytes(c.array("f32")?)),
        ValueType::U64 => MetadataValue::U64(c.u64("u64")?),
        ValueType::I64 => MetadataValue::I64(i64::from_le_bytes(c.array("i64")?)),
        ValueType::F64 => MetadataValue::F64(f64::from_le_bytes(c.array("f64")?)),
    })
}

fn bool_from(b: u8, offset: u64) -> Result<bool, GgufError> {
    match b {
        0 => Ok(false),
        1 => Ok(true),
        value => Err(GgufError::InvalidBool { value, offset }),
    }
}

fn read_array(c: &mut Cursor<'_>, depth: u32) -> Result<MetadataArray, GgufError> {
    let off = c.pos();
    if depth > MAX_ARRAY_DEPTH {
        return Err(GgufError::ArrayTooDeep {
            offset: off,
            max_depth: MAX_ARRAY_DEPTH,
        });
    }
    let type_id = c.u32("array element type")?;
    let ty = ValueType::from_id(type_id).ok_or(GgufError::UnknownValueType {
        type_id,
        offset: off,
    })?;
    let count_off = c.pos();
    let count = c.u64("array length")?;
    c.check_count(count, ty.min_size(), count_off, "array element")?;
    Ok(match ty {
        ValueType::String => {
            let mut v = Vec::with_capacity(c.capacity_for(count, 8));
            for _ in 0..count {
                v.push(c.string("metadata string")?);
            }
            MetadataArray::String(v)
        }
        ValueType::Array => {
            let mut v = Vec::with_capacity(c.capacity_for(count, 12));
            for _ in 0..count {
                v.push(read_array(c, depth + 1)?);
            }
            MetadataArray::Array(v)
        }
        ValueType::Bool => {
            let bytes = c.take(count, "bool array")?;
            let mut v = Vec::with_capacity(bytes.len());
            for (i, &b) in bytes.iter().enumerate() {
                v.push(bool_from(b, count_off + 8 + i as u64)?);
            }
            MetadataArray::Bool(v)
        }
        _ => {
            // count <= logical bytes left / size, so the product cannot overflow.
            let bytes = c.take(count * ty.min_size(), "array data")?;
            decode_fixed(ty, bytes)
        }
    })
}

/// Decodes a run of fixed-width little-endian numbers (`bytes.len()` is a multiple of the width).
fn decode_fixed(ty: ValueType, bytes: &[u8]) -> MetadataArray {
    fn le<const N: usize, T>(b: &[u8], f: fn([u8; N]) -> T) -> Vec<T> {
        b.chunks_exact(N)
            .map(|c| f(c.try_into().unwrap_or([0; N])))
            .collect()
    }
    match ty {
        ValueType::U8 => MetadataArray::U8(bytes.to_vec()),
        ValueType::I8 => MetadataArray::I8(bytes.iter().map(|&b| b as i8).collect()),
        ValueType::U16 => MetadataArray::U16(le(bytes, u16::from_le_bytes)),
        ValueType::I16 => MetadataArray::I16(le(bytes, i16::from_le_bytes)),
        ValueType::U32 => MetadataArray::U32(le(bytes, u32::from_le_bytes)),
        ValueType::I32 => MetadataArray::I32(le(bytes, i32::from_le_bytes)),
        ValueType::F32 => MetadataArray::F32(le(bytes, f32::from_le_bytes)),
        ValueType::U64 => MetadataArray::U64(le(bytes, u64::from_le_bytes)),
        ValueType::I64 => MetadataArray::I64(le(bytes, i64::from_le_bytes)),
        ValueType::F64 => MetadataArray::F64(le(bytes, f64::from_le_bytes)),
        // Not fixed-width; callers never pass these.
        ValueType::Bool | ValueType::String | ValueType::Array => MetadataArray::U8(Vec::new()),
    }
}
