//! Weight matrices on the GPU, kept in their ggml format.
//!
//! Convention (ggml's): a tensor with dims `[k, n]` (`dims[0] = k` contiguous) is `n` rows of
//! `k` values, and `y[r] = sum_c W[r][c] x[c]`.
//!
//! # GPU layouts (after [`repack`])
//! WGSL storage is read in u32 words, and ggml's Q8_0 (34-byte) and Q4_0 (18-byte) blocks
//! are not 4-byte aligned. Rather than shifting unaligned bytes in every kernel, [`repack`]
//! inserts two zero bytes after the f16 scale of each block; nothing else changes:
//!
//! | format | ggml block | GPU block | words | contents (little-endian) |
//! |---|---|---|---|---|
//! | F32  | 4 B / 1  | same  | 1 per value | f32 |
//! | F16  | 2 B / 1  | same  | ½ per value | f16; element i in the low half of word i/2 if i is even |
//! | Q8_0 | 34 B / 32 | 36 B | 9 | word 0: f16 d (low half), 0 (high); words 1..8: 32 × i8 |
//! | Q4_0 | 18 B / 32 | 20 B | 5 | word 0: f16 d, 0; words 1..4: 16 bytes of nibble pairs |
//! | Q4_1 | 20 B / 32 | same | 5 | word 0: f16 d (low), f16 m (high); words 1..4: nibbles |
//! | Q5_0 | 22 B / 32 | 24 B | 6 | word 0: f16 d, 0; word 1: qh (fifth bits); words 2..5: nibbles |
//! | Q5_1 | 24 B / 32 | same | 6 | word 0: f16 d, f16 m; word 1: qh; words 2..5: nibbles |
//! | BF16 | 2 B / 1 | same | ½ per value | bf16 (the top half of an f32), packed as F16 |
//! | Q2_K | 84 B / 256 | same | 21 | words 0..3: 16 scale bytes (low nibble scale, high nibble min); words 4..19: ggml's 64 quant bytes; word 20: f16 d, f16 dmin |
//! | Q3_K | 110 B / 256 | 116 B | 29 | word 0: f16 d, 0; words 1..4: the 16 6-bit scales unpacked to bytes (stored + 32); words 5..20: each 8-value unit's 2-bit low parts, 16 bits per unit; words 21..28: its high bits, a byte per unit |
//! | Q4_K | 144 B / 256 | 148 B | 37 | word 0: f16 d, f16 dmin; words 1..4: the 8 (scale, min) 6-bit pairs unpacked to bytes; words 5..36: ggml's 128 quant bytes |
//! | Q5_K | 176 B / 256 | 180 B | 45 | words 0..4 as Q4_K; words 5..36: each 8-value unit's low nibbles; words 37..44: its fifth bits, a byte per unit |
//! | Q6_K | 210 B / 256 | 212 B | 53 | word 0: f16 d, 0; words 1..4: 16 × i8 scales; words 5..36: each 8-value unit's low nibbles; words 37..52: its 2-bit high parts, 16 bits per unit |
//!
//! Nibbles: element j < 16 of a block is the low nibble of quant byte j, element j + 16 its
//! high nibble. The WGSL decoders are `shaders/weights_<format>.wgsl`; Q8_0 and Q4_0 cost
//! 6% and 11% more memory than in the file, Q5_0 9%, Q4_K 2.8% (its scales unpacked, so a
//! unit needs one scale word instead of three), Q5_K 2.3% (scales unpacked, and its bits
//! regrouped per unit so that a unit reads four words, not six), Q6_K 1.0% (ggml's block is
//! not 4-byte aligned, and regrouping its bits per unit lets each unit read four words) and Q3_K
//! 5.5% (not aligned either; scales unpacked and bits regrouped per unit, four words per unit).
//! Q2_K is read as stored. In every K-quant, the 16 values of sub-block v / 16 share a scale,
//! so unit s (values 8s..8s+7 of its superblock) uses scale s / 2.
//!
//! # Chunks
//! A weight larger than maxStorageBufferBindingSize (or maxBufferSize) is split by rows into
//! several buffers ([`WeightChunk`]); kernels record one dispatch per chunk. F16 rows with an
//! odd `k` are split at even rows only, so every chunk starts on a word.

use super::binding::{BufferView, Res};
use crate::error::{FuselmError, Result};
use crate::gguf::{scale_min_k4, GgmlType};
use crate::gpu::GpuContext;
use crate::shaders;
use std::borrow::Cow;

/// A weight format the kernels decode on the GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)] // ggml's names
pub enum WeightFormat {
    F32,
    F16,
    Q8_0,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    BF16,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
}

impl WeightFormat {
    pub const ALL: [WeightFormat; 13] = [
        WeightFormat::F32,
        WeightFormat::F16,
        WeightFormat::Q8_0,
        WeightFormat::Q4_0,
        WeightFormat::Q4_1,
        WeightFormat::Q5_0,
        WeightFormat::Q5_1,
        WeightFormat::BF16,
        WeightFormat::Q2_K,
        WeightFormat::Q3_K,
        WeightFormat::Q4_K,
        WeightFormat::Q5_K,
        WeightFormat::Q6_K,
    ];

    /// The GPU format for a ggml type (every type the GGUF reader decodes has one; other type
    /// ids are refused by the reader and `shared::check_fit`).
    pub fn from_ggml(ty: GgmlType) -> Result<Self> {
        Ok(match ty {
            GgmlType::F32 => WeightFormat::F32,
            GgmlType::F16 => WeightFormat::F16,
            GgmlType::Q8_0 => WeightFormat::Q8_0,
            GgmlType::Q4_0 => WeightFormat::Q4_0,
            GgmlType::Q4_1 => WeightFormat::Q4_1,
            GgmlType::Q5_0 => WeightFormat::Q5_0,
            GgmlType::Q5_1 => WeightFormat::Q5_1,
            GgmlType::BF16 => WeightFormat::BF16,
            GgmlType::Q2_K => WeightFormat::Q2_K,
            GgmlType::Q3_K => WeightFormat::Q3_K,
            GgmlType::Q4_K => WeightFormat::Q4_K,
            GgmlType::Q5_K => WeightFormat::Q5_K,
            GgmlType::Q6_K => WeightFormat::Q6_K,
        })
    }

    pub fn ggml(self) -> GgmlType {
        match self {
            WeightFormat::F32 => GgmlType::F32,
            WeightFormat::F16 => GgmlType::F16,
            WeightFormat::Q8_0 => GgmlType::Q8_0,
            WeightFormat::Q4_0 => GgmlType::Q4_0,
            WeightFormat::Q4_1 => GgmlType::Q4_1,
            WeightFormat::Q5_0 => GgmlType::Q5_0,
            WeightFormat::Q5_1 => GgmlType::Q5_1,
            WeightFormat::BF16 => GgmlType::BF16,
            WeightFormat::Q2_K => GgmlType::Q2_K,
            WeightFormat::Q3_K => GgmlType::Q3_K,
            WeightFormat::Q4_K => GgmlType::Q4_K,
            WeightFormat::Q5_K => GgmlType::Q5_K,
            WeightFormat::Q6_K => GgmlType::Q6_K,
        }
    }

    /// Values per block (1 for float formats).
    pub fn block_len(self) -> u64 {
        match self {
            WeightFormat::F32 | WeightFormat::F16 | WeightFormat::BF16 => 1,
            WeightFormat::Q2_K
            | WeightFormat::Q3_K
            | WeightFormat::Q4_K
            | WeightFormat::Q5_K
            | WeightFormat::Q6_K => 256,
            _ => 32,
        }
    }

    /// Bytes per block in the GPU layout.
    pub fn gpu_block_bytes(self) -> u64 {
        match self {
            WeightFormat::F32 => 4,
            WeightFormat::F16 | WeightFormat::BF16 => 2,
            WeightFormat::Q8_0 => 36,
            WeightFormat::Q4_0 | WeightFormat::Q4_1 => 20,
            WeightFormat::Q5_0 | WeightFormat::Q5_1 => 24,
            WeightFormat::Q2_K => 84,
            WeightFormat::Q3_K => 116,
            WeightFormat::Q4_K => 148,
            WeightFormat::Q5_K => 180,
            WeightFormat::Q6_K => 212,
        }
    }

    /// Bytes of one row of `k` values in the GPU layout.
    pub fn gpu_row_bytes(self, k: u64) -> u64 {
        k / self.block_len() * self.gpu_block_bytes()
    }

    /// The decoder reading the buffer `buffer` with helpers renamed `prefix_*` (so
    /// `prefix_load8`) and block-size constants suffixed `_prefix`: the megakernel holds every
    /// format of a model, all reading one arena.
    pub(crate) fn decoder_reading(self, buffer: &str, prefix: &str) -> String {
        rename_identifiers(self.decoder(), |id| {
            if id == "w" {
                Some(buffer.to_string())
            } else if let Some(rest) = id.strip_prefix("w_") {
                Some(format!("{prefix}_{rest}"))
            } else if id.ends_with("_WORDS") {
                Some(format!("{id}_{prefix}"))
            } else {
                None
            }
        })
    }

    /// The WGSL decoder (`w_load8`) for this format.
    pub(crate) fn decoder(self) -> &'static str {
        match self {
            WeightFormat::F32 => shaders::WEIGHTS_F32,
            WeightFormat::F16 => shaders::WEIGHTS_F16,
            WeightFormat::Q8_0 => shaders::WEIGHTS_Q8_0,
            WeightFormat::Q4_0 => shaders::WEIGHTS_Q4_0,
            WeightFormat::Q4_1 => shaders::WEIGHTS_Q4_1,
            WeightFormat::Q5_0 => shaders::WEIGHTS_Q5_0,
            WeightFormat::Q5_1 => shaders::WEIGHTS_Q5_1,
            WeightFormat::BF16 => shaders::WEIGHTS_BF16,
            WeightFormat::Q2_K => shaders::WEIGHTS_Q2_K,
            WeightFormat::Q3_K => shaders::WEIGHTS_Q3_K,
            WeightFormat::Q4_K => shaders::WEIGHTS_Q4_K,
            WeightFormat::Q5_K => shaders::WEIGHTS_Q5_K,
            WeightFormat::Q6_K => shaders::WEIGHTS_Q6_K,
        }
    }
}

/// Rewrites every WGSL identifier for which `rename` returns a new name (numbers and other
/// tokens pass through untouched).
fn rename_identifiers(source: &str, rename: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(source.len() + 64);
    let mut chars = source.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c.is_ascii_alphanumeric() || c == '_' {
            let mut end = start + c.len_utf8();
            while let Some(&(i, d)) = chars.peek() {
                if d.is_ascii_alphanumeric() || d == '_' {
                    end = i + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            let token = &source[start..end];
            // Members and swizzles (`raw.w`) are not identifiers of the module.
            let member = source[..start].ends_with('.');
            match (c.is_ascii_digit() || member, rename(token)) {
                (false, Some(new)) => out.push_str(&new),
                _ => out.push_str(token),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// What [`repack`] produced: the format and its GPU block geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightLayout {
    pub format: WeightFormat,
    /// Values per block.
    pub block_len: u64,
    /// Bytes per block on the GPU (see the module table).
    pub gpu_block_bytes: u64,
}

/// Converts ggml tensor bytes of type `ty` into the GPU layout (module docs). Pure; the
/// result is not padded to 4 bytes (an odd count of F16 values stays odd). Formats whose layout
/// is the file's are borrowed, not copied (a load holds one copy of a tensor, not two).
pub fn repack(ty: GgmlType, bytes: &[u8]) -> Result<(WeightLayout, Cow<'_, [u8]>)> {
    let format = WeightFormat::from_ggml(ty)?;
    let layout = WeightLayout {
        format,
        block_len: format.block_len(),
        gpu_block_bytes: format.gpu_block_bytes(),
    };
    let block = ty.block_bytes();
    if block == 0 || bytes.len() % block != 0 {
        return Err(FuselmError::InvalidArgument(format!(
            "{ty} data of {} bytes is not a whole number of {block}-byte blocks",
            bytes.len()
        )));
    }
    let out = match format {
        WeightFormat::F32
        | WeightFormat::F16
        | WeightFormat::BF16
        | WeightFormat::Q4_1
        | WeightFormat::Q5_1
        | WeightFormat::Q2_K => Cow::Borrowed(bytes),
        WeightFormat::Q3_K => {
            let mut out = Vec::with_capacity(bytes.len() / block * 116);
            for b in bytes.chunks_exact(block) {
                repack_q3_k(b, &mut out);
            }
            Cow::Owned(out)
        }
        WeightFormat::Q4_K => {
            let mut out = Vec::with_capacity(bytes.len() / block * 148);
            for b in bytes.chunks_exact(block) {
                out.extend_from_slice(&b[..4]);
                for j in 0..8 {
                    let (sc, m) = scale_min_k4(j, &b[4..16]);
                    out.extend_from_slice(&[sc, m]);
                }
                out.extend_from_slice(&b[16..144]);
            }
            Cow::Owned(out)
        }
        WeightFormat::Q5_K => {
            let mut out = Vec::with_capacity(bytes.len() / block * 180);
            for b in bytes.chunks_exact(block) {
                repack_q5_k(b, &mut out);
            }
            Cow::Owned(out)
        }
        WeightFormat::Q6_K => {
            let mut out = Vec::with_capacity(bytes.len() / block * 212);
            for b in bytes.chunks_exact(block) {
                repack_q6_k(b, &mut out);
            }
            Cow::Owned(out)
        }
        WeightFormat::Q8_0 | WeightFormat::Q4_0 | WeightFormat::Q5_0 => {
            let mut out = Vec::with_capacity(bytes.len() / block * (block + 2));
            for b in bytes.chunks_exact(block) {
                out.extend_from_slice(&b[..2]);
                out.extend_from_slice(&[0, 0]);
                out.extend_from_slice(&b[2..]);
            }
            Cow::Owned(out)
        }
    };
    Ok((layout, out))
}

/// One ggml Q3_K block (110 bytes) in the GPU layout (116 bytes, module docs).
fn repack_q3_k(b: &[u8], out: &mut Vec<u8>) {
    // Each value's 2-bit low part and high bit, indexed as ggml's dequantize_row_q3_K:
    // v = 128 h + 32 j + 16 sub + l.
    let (hmask, qs) = (&b[0..32], &b[32..96]);
    let (mut low, mut high) = ([0u8; 256], [0u8; 256]);
    for v in 0..256 {
        let (h, j, sub, l) = (v / 128, (v / 32) % 4, (v / 16) % 2, v % 16);
        low[v] = (qs[32 * h + 16 * sub + l] >> (2 * j)) & 3;
        high[v] = (hmask[16 * sub + l] >> (4 * h + j)) & 1;
    }
    out.extend_from_slice(&b[108..110]);
    out.extend_from_slice(&[0, 0]);
    out.extend((0..16).map(|i| crate::gguf::q3_k_scale(&b[96..108], i)));
    for unit in low.chunks_exact(8) {
        let bits = unit
            .iter()
            .enumerate()
            .fold(0u16, |w, (i, &q)| w | (u16::from(q) << (2 * i)));
        out.extend_from_slice(&bits.to_le_bytes());
    }
    for unit in high.chunks_exact(8) {
        out.push(unit.iter().enumerate().fold(0u8, |w, (i, &q)| w | (q << i)));
    }
}

/// One ggml Q5_K block (176 bytes) in the GPU layout (180 bytes, module docs).
fn repack_q5_k(b: &[u8], out: &mut Vec<u8>) {
    // The 5-bit quant of each of the 256 values, indexed as ggml's dequantize_row_q5_K.
    let (qh, qs) = (&b[16..48], &b[48..176]);
    let mut q = [0u8; 256];
    for chunk in 0..4 {
        for l in 0..32 {
            let byte = qs[32 * chunk + l];
            q[64 * chunk + l] = (byte & 0x0f) | (((qh[l] >> (2 * chunk)) & 1) << 4);
            q[64 * chunk + 32 + l] = (byte >> 4) | (((qh[l] >> (2 * chunk + 1)) & 1) << 4);
        }
    }
    out.extend_from_slice(&b[..4]);
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, &b[4..16]);
        out.extend_from_slice(&[sc, m]);
    }
    for unit in q.chunks_exact(8) {
        // Values 0..3 in the low nibbles of the four bytes, 4..7 in their high nibbles.
        out.extend((0..4).map(|i| (unit[i] & 0x0f) | ((unit[i + 4] & 0x0f) << 4)));
    }
    for unit in q.chunks_exact(8) {
        out.push(
            unit.iter()
                .enumerate()
                .fold(0u8, |h, (i, &v)| h | ((v >> 4) << i)),
        );
    }
}

/// One ggml Q6_K block (210 bytes) in the GPU layout (212 bytes, module docs).
fn repack_q6_k(b: &[u8], out: &mut Vec<u8>) {
    // The 6-bit quant of each of the 256 values, indexed as ggml's dequantize_row_q6_K.
    let mut q = [0u8; 256];
    for half in 0..2 {
        let ql = &b[64 * half..64 * half + 64];
        let qh = &b[128 + 32 * half..128 + 32 * half + 32];
        let q = &mut q[128 * half..128 * half + 128];
        for l in 0..32 {
            q[l] = (ql[l] & 0x0f) | ((qh[l] & 3) << 4);
            q[l + 32] = (ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4);
            q[l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
            q[l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
        }
    }
    out.extend_from_slice(&b[208..210]);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&b[192..208]);
    for unit in q.chunks_exact(8) {
        let lo = unit
            .iter()
            .enumerate()
            .fold(0u32, |w, (i, &v)| w | (u32::from(v & 0x0f) << (4 * i)));
        out.extend_from_slice(&lo.to_le_bytes());
    }
    for pair in q.chunks_exact(16) {
        let hi = pair
            .iter()
            .enumerate()
            .fold(0u32, |w, (i, &v)| w | (u32::from(v >> 4) << (2 * i)));
        out.extend_from_slice(&hi.to_le_bytes());
    }
}

/// One row-range of a weight: its own buffer, or its slice of a buffer that stacks the same
/// matrix of every layer ([`LayerStacks`]).
#[derive(Debug)]
pub struct WeightChunk {
    pub view: BufferView,
    /// Index of the chunk's first row in the whole weight.
    pub row0: u32,
    pub rows: u32,
}

impl WeightChunk {
    /// The chunk as a binding.
    pub fn binding(&self) -> Res<'_> {
        (&self.view).into()
    }
}

/// A `[k, n]` weight (n rows of k values) resident on the GPU in its format.
#[derive(Debug)]
pub struct GpuWeight {
    pub format: WeightFormat,
    pub k: u32,
    pub n: u32,
    chunks: Vec<WeightChunk>,
}

impl GpuWeight {
    /// Uploads ggml bytes of a `[k, n]` tensor of type `ty`, split into row-chunks no larger
    /// than maxStorageBufferBindingSize and maxBufferSize.
    pub fn upload(
        ctx: &GpuContext,
        label: &str,
        ty: GgmlType,
        k: u64,
        n: u64,
        bytes: &[u8],
    ) -> Result<Self> {
        let limits = ctx.device.limits();
        let max = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        Self::upload_chunked(ctx, label, ty, k, n, bytes, max)
    }

    /// [`GpuWeight::upload`] with chunks of at most `max_chunk_bytes` (tests use it to force
    /// splitting on small weights).
    pub fn upload_chunked(
        ctx: &GpuContext,
        label: &str,
        ty: GgmlType,
        k: u64,
        n: u64,
        bytes: &[u8],
        max_chunk_bytes: u64,
    ) -> Result<Self> {
        let format = WeightFormat::from_ggml(ty)?;
        let (k32, n32) = match (u32::try_from(k), u32::try_from(n)) {
            (Ok(k32), Ok(n32)) if k32 > 0 && n32 > 0 => (k32, n32),
            _ => {
                return Err(FuselmError::InvalidArgument(format!(
                    "weight {label}: dims [{k}, {n}] must be in 1..2^32"
                )))
            }
        };
        if k % format.block_len() != 0 {
            return Err(FuselmError::InvalidArgument(format!(
                "weight {label}: k = {k} is not a multiple of the {ty} block ({})",
                format.block_len()
            )));
        }
        let expected = ty.row_bytes(k).and_then(|r| r.checked_mul(n));
        if expected != Some(bytes.len() as u64) {
            return Err(FuselmError::InvalidArgument(format!(
                "weight {label}: {} bytes for {ty} [{k}, {n}], expected {expected:?}",
                bytes.len()
            )));
        }
        let rows = rows_per_chunk(format, k, max_chunk_bytes)?;
        let (_, packed) = repack(ty, bytes)?;
        let row_bytes = format.gpu_row_bytes(k);
        let mut chunks = Vec::new();
        let mut row0 = 0u64;
        while row0 < n {
            let count = rows.min(n - row0);
            let start = (row0 * row_bytes) as usize;
            let end = ((row0 + count) * row_bytes) as usize;
            let buffer = upload_padded(ctx, label, &packed[start..end]);
            chunks.push(WeightChunk {
                view: BufferView::whole(buffer),
                row0: row0 as u32,
                rows: count as u32,
            });
            row0 += count;
        }
        Ok(Self {
            format,
            k: k32,
            n: n32,
            chunks,
        })
    }

    pub fn chunks(&self) -> &[WeightChunk] {
        &self.chunks
    }

    /// Copies one matrix of every layer (`layers`, in order) into one buffer, each layer's rows
    /// starting at a multiple of the device's offset alignment, and points every weight at its
    /// slice; the per-layer buffers are released. A kernel that binds the stack reads layer
    /// `l`'s row `r` as row `l * stride + r`. Returns that stride in rows, or `None` (nothing
    /// changed) when the layers' formats or shapes differ, a weight is split into chunks, or the
    /// stack would not fit one storage binding.
    pub fn stack(ctx: &GpuContext, label: &str, layers: &mut [&mut GpuWeight]) -> Option<u32> {
        let first = layers.first()?;
        let (format, k, n) = (first.format, first.k, first.n);
        let uniform = layers
            .iter()
            .all(|w| w.format == format && w.k == k && w.n == n && w.chunks.len() == 1);
        if !uniform {
            return None;
        }
        let row_bytes = format.gpu_row_bytes(u64::from(k));
        let align = u64::from(
            ctx.device
                .limits()
                .min_storage_buffer_offset_alignment
                .max(4),
        );
        let step = align / gcd(row_bytes, align);
        let stride_rows = u64::from(n).div_ceil(step) * step;
        let slot = u32::try_from(stride_rows).ok()?;
        let (views, stride) =
            super::binding::stack_views(ctx, label, layers.len(), stride_rows * row_bytes)?;
        let mut encoder = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor { label: Some(label) });
        let mut replaced = Vec::with_capacity(layers.len());
        for (w, view) in layers.iter_mut().zip(views) {
            debug_assert_eq!(stride, stride_rows * row_bytes);
            let old = &w.chunks[0].view;
            replaced.push(old.buffer.clone());
            encoder.copy_buffer_to_buffer(
                &old.buffer,
                old.offset,
                &view.buffer,
                view.offset,
                old.size,
            );
            w.chunks[0].view = BufferView {
                size: old.size,
                ..view
            };
        }
        ctx.queue.submit([encoder.finish()]);
        // Each chunk has a buffer of its own (`upload_padded`); the copies already queued
        // still read them (destroy waits for submitted work).
        for b in &replaced {
            ctx.release(b);
        }
        Some(slot)
    }

    /// Bytes of the whole weight on the GPU (what a matrix–vector product streams).
    pub fn gpu_bytes(&self) -> u64 {
        self.format.gpu_row_bytes(u64::from(self.k)) * u64::from(self.n)
    }
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Which layer matrices live in per-role stacks ([`GpuWeight::stack`]): the stride in rows
/// between layers for wq, wk, wv, wo, gate, up, down (in that order), 0 where that matrix has
/// one buffer per layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LayerStacks {
    pub stride_rows: [u32; 7],
}

/// A storage buffer holding `data` zero-padded to whole words, written straight from `data`
/// (`create_buffer_init` would stage a second copy of it in wasm memory).
fn upload_padded(ctx: &GpuContext, label: &str, data: &[u8]) -> wgpu::Buffer {
    let size = (data.len() as u64).div_ceil(4).max(1) * 4;
    let buffer = ctx.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage: wgpu::BufferUsages::STORAGE
            | wgpu::BufferUsages::COPY_DST
            | wgpu::BufferUsages::COPY_SRC,
        mapped_at_creation: false,
    });
    let whole = data.len() / 4 * 4;
    if whole > 0 {
        ctx.queue.write_buffer(&buffer, 0, &data[..whole]);
    }
    if whole < data.len() {
        let mut tail = [0u8; 4];
        tail[..data.len() - whole].copy_from_slice(&data[whole..]);
        ctx.queue.write_buffer(&buffer, whole as u64, &tail);
    }
    buffer
}

/// Rows per chunk so that a chunk (padded to 4 bytes) fits `max_bytes` and starts on a word.
fn rows_per_chunk(format: WeightFormat, k: u64, max_bytes: u64) -> Result<u64> {
    let row_bytes = format.gpu_row_bytes(k);
    let mut rows = max_bytes.saturating_sub(3) / row_bytes.max(1);
    if row_bytes % 4 != 0 {
        rows &= !1; // odd-k F16: an even row count keeps every chunk word-aligned
    }
    if rows == 0 {
        return Err(FuselmError::LimitExceeded {
            limit: "maxStorageBufferBindingSize",
            needed: row_bytes * if row_bytes % 4 != 0 { 2 } else { 1 },
            available: max_bytes,
        });
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    #[test]
    fn renamed_decoders_rename_only_their_own_identifiers() {
        let q = WeightFormat::Q4_1.decoder_reading("wq", "wq_at");
        assert!(q.contains("fn wq_at_load8(") && q.contains("wq[base]"));
        assert!(
            q.contains("const Q4_1_WORDS_wq_at") && !q.contains("w[") && !q.contains("w_load8")
        );
        assert!(q.contains("unpack2x16float") && q.contains("nibbles4"));
        let h = WeightFormat::F16.decoder_reading("wk", "wk_at");
        assert!(h.contains("raw.w)") && h.contains("fn wk_at_fetch(") && h.contains("wk[j]"));
        assert_eq!(
            WeightFormat::F32.decoder_reading("w", "w"),
            WeightFormat::F32.decoder()
        );
    }

    use super::*;
    use crate::gguf::{
        dequantize, quantize_q4_0, quantize_q4_1, quantize_q5_0, quantize_q5_1, quantize_q8_0,
    };

    fn values(n: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 17.0)
            .collect()
    }

    /// Decodes one GPU-layout block the way the WGSL decoders do.
    fn decode_gpu(format: WeightFormat, block: &[u8]) -> Vec<f32> {
        let half = |o: usize| crate::gguf::f16_to_f32(u16::from_le_bytes([block[o], block[o + 1]]));
        let nib = |j: usize| {
            let b = block[4 + j % 16];
            f32::from(if j < 16 { b & 15 } else { b >> 4 })
        };
        match format {
            WeightFormat::Q8_0 => (0..32)
                .map(|j| f32::from(block[4 + j] as i8) * half(0))
                .collect(),
            WeightFormat::Q4_0 => (0..32).map(|j| (nib(j) - 8.0) * half(0)).collect(),
            WeightFormat::Q4_1 => (0..32).map(|j| nib(j) * half(0) + half(2)).collect(),
            WeightFormat::Q5_0 | WeightFormat::Q5_1 => {
                let qh = u32::from_le_bytes([block[4], block[5], block[6], block[7]]);
                let b = |j: usize| block[8 + j % 16];
                let q = |j: usize| {
                    let nib = if j < 16 { b(j) & 15 } else { b(j) >> 4 };
                    f32::from(nib) + if qh >> j & 1 == 1 { 16.0 } else { 0.0 }
                };
                if format == WeightFormat::Q5_0 {
                    (0..32).map(|j| (q(j) - 16.0) * half(0)).collect()
                } else {
                    (0..32).map(|j| q(j) * half(0) + half(2)).collect()
                }
            }
            _ => Vec::new(),
        }
    }

    #[test]
    fn repacked_blocks_decode_like_ggml() {
        let x = values(96);
        let cases = [
            (GgmlType::Q8_0, quantize_q8_0(&x)),
            (GgmlType::Q4_0, quantize_q4_0(&x)),
            (GgmlType::Q4_1, quantize_q4_1(&x)),
            (GgmlType::Q5_0, quantize_q5_0(&x)),
            (GgmlType::Q5_1, quantize_q5_1(&x)),
        ];
        for (ty, bytes) in cases {
            let (layout, packed) = repack(ty, &bytes).unwrap();
            assert_eq!(packed.len() as u64, 3 * layout.gpu_block_bytes, "{ty}");
            assert_eq!(packed.len() % 4, 0, "{ty}");
            let want = dequantize(ty, &bytes, 96).unwrap();
            let got: Vec<f32> = packed
                .chunks_exact(layout.gpu_block_bytes as usize)
                .flat_map(|b| decode_gpu(layout.format, b))
                .collect();
            assert_eq!(got, want, "{ty}");
        }
    }

    #[test]
    fn repack_rejects_partial_blocks() {
        assert!(repack(GgmlType::Q8_0, &[0; 33]).is_err());
        assert!(repack(GgmlType::Q4_K, &[0; 143]).is_err());
        assert!(repack(GgmlType::Q6_K, &[0; 211]).is_err());
        assert!(repack(GgmlType::Q5_K, &[0; 175]).is_err());
        assert_eq!(repack(GgmlType::Q3_K, &[0; 220]).unwrap().1.len(), 2 * 116);
        assert!(matches!(
            repack(GgmlType::Q2_K, &[0; 168]).unwrap().1,
            Cow::Borrowed(_)
        ));
        assert_eq!(repack(GgmlType::Q5_K, &[0; 352]).unwrap().1.len(), 2 * 180);
        assert_eq!(repack(GgmlType::Q5_0, &[0; 44]).unwrap().1.len(), 2 * 24);
        assert_eq!(repack(GgmlType::Q4_K, &[0; 288]).unwrap().1.len(), 2 * 148);
        assert_eq!(repack(GgmlType::Q6_K, &[0; 420]).unwrap().1.len(), 2 * 212);
        let (_, same) = repack(GgmlType::F16, &[1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(&same[..], [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn chunks_are_word_aligned() {
        assert_eq!(rows_per_chunk(WeightFormat::F16, 33, 700).unwrap(), 10);
        assert_eq!(rows_per_chunk(WeightFormat::Q8_0, 64, 200).unwrap(), 2);
        assert!(matches!(
            rows_per_chunk(WeightFormat::F32, 100, 300),
            Err(FuselmError::LimitExceeded { .. })
        ));
    }
}
