//! ggml tensor element types and their block layouts.
//!
//! [`GgmlType`] lists only the types this crate can dequantize and run. Files may still
//! contain other ggml types (Q8_K, IQ*, ...): for those we know the block geometry from
//! `ggml.c`'s type traits, so the header stays fully inspectable (sizes, offsets, overlap
//! checks) and only reading that tensor's data as numbers fails. Type ids absent from the
//! table below cannot be sized at all and are rejected when the directory is parsed.

use serde::{Deserialize, Serialize};

/// A tensor element type this crate can dequantize. Discriminants are ggml's type ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[repr(u32)]
#[allow(non_camel_case_types)] // ggml's names (Q4_K) are what users search for
pub enum GgmlType {
    F32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q5_0 = 6,
    Q5_1 = 7,
    Q8_0 = 8,
    Q2_K = 10,
    Q3_K = 11,
    Q4_K = 12,
    Q5_K = 13,
    Q6_K = 14,
    BF16 = 30,
}

/// Elements per block of the 256-element "K" super-block quantizations.
pub const QK_K: usize = 256;

impl GgmlType {
    /// All supported types, in id order.
    pub const ALL: [GgmlType; 13] = [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::BF16,
    ];

    /// Maps a ggml type id to a supported type; `None` for anything else.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        GgmlType::ALL.into_iter().find(|t| t.id() == id)
    }

    /// ggml's numeric type id (as stored in GGUF).
    pub fn id(self) -> u32 {
        self as u32
    }

    /// ggml's name for the type (as printed by llama.cpp).
    pub fn name(self) -> &'static str {
        type_name(self.id()).unwrap_or("?")
    }

    /// Elements per quantization block (1 for plain float types).
    pub fn block_len(self) -> usize {
        layout(self.id()).map_or(1, |(len, _)| len as usize)
    }

    /// Bytes per quantization block.
    pub fn block_bytes(self) -> usize {
        layout(self.id()).map_or(0, |(_, bytes)| bytes as usize)
    }

    /// Bytes taken by `n` elements, or `None` if `n` is not a whole number of blocks or
    /// the byte count overflows.
    pub fn row_bytes(self, n: u64) -> Option<u64> {
        bytes_for(self.id(), n)
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// (block length in elements, block size in bytes) for every ggml type id whose layout we
/// know, supported or not. Ids 4, 5 (Q4_2/Q4_3) and 31..=33 (repacked Q4_0_x_x) were removed
/// from ggml and are deliberately absent.
pub(crate) fn layout(type_id: u32) -> Option<(u64, u64)> {
    Some(match type_id {
        0 => (1, 4),      // F32
        1 => (1, 2),      // F16
        2 => (32, 18),    // Q4_0: f16 d + 16 nibble bytes
        3 => (32, 20),    // Q4_1: f16 d, f16 m + 16 nibble bytes
        6 => (32, 22),    // Q5_0: f16 d, u32 qh (fifth bits) + 16 nibble bytes
        7 => (32, 24),    // Q5_1: f16 d, f16 m, u32 qh + 16 nibble bytes
        8 => (32, 34),    // Q8_0: f16 d + 32 i8
        9 => (32, 36), // Q8_1 (current ggml: f16 d, f16 s; old gguf-py says 40, never stored in files)
        10 => (256, 84), // Q2_K: 16 scale bytes (4-bit scale, 4-bit min), 64 quant bytes, f16 d, f16 dmin
        11 => (256, 110), // Q3_K: 32 hmask bytes, 64 quant bytes, 12 scale bytes, f16 d
        12 => (256, 144), // Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 nibble bytes
        13 => (256, 176), // Q5_K: f16 d, f16 dmin, 12 scale bytes, 32 qh bytes, 128 nibble bytes
        14 => (256, 210), // Q6_K: 128 ql, 64 qh, 16 i8 scales, f16 d
        15 => (256, 292), // Q8_K
        16 => (256, 66), // IQ2_XXS
        17 => (256, 74), // IQ2_XS
        18 => (256, 98), // IQ3_XXS
        19 => (256, 50), // IQ1_S
        20 => (32, 18),  // IQ4_NL
        21 => (256, 110), // IQ3_S
        22 => (256, 82), // IQ2_S
        23 => (256, 136), // IQ4_XS
        24 => (1, 1),    // I8
        25 => (1, 2),    // I16
        26 => (1, 4),    // I32
        27 => (1, 8),    // I64
        28 => (1, 8),    // F64
        29 => (256, 56), // IQ1_M
        30 => (1, 2),    // BF16
        34 => (256, 54), // TQ1_0
        35 => (256, 66), // TQ2_0
        39 => (32, 17),  // MXFP4
        40 => (64, 36),  // NVFP4
        41 => (128, 18), // Q1_0
        _ => return None,
    })
}

/// ggml's type name for an id with a known layout.
pub fn type_name(type_id: u32) -> Option<&'static str> {
    const NAMES: [(u32, &str); 34] = [
        (0, "F32"),
        (1, "F16"),
        (2, "Q4_0"),
        (3, "Q4_1"),
        (6, "Q5_0"),
        (7, "Q5_1"),
        (8, "Q8_0"),
        (9, "Q8_1"),
        (10, "Q2_K"),
        (11, "Q3_K"),
        (12, "Q4_K"),
        (13, "Q5_K"),
        (14, "Q6_K"),
        (15, "Q8_K"),
        (16, "IQ2_XXS"),
        (17, "IQ2_XS"),
        (18, "IQ3_XXS"),
        (19, "IQ1_S"),
        (20, "IQ4_NL"),
        (21, "IQ3_S"),
        (22, "IQ2_S"),
        (23, "IQ4_XS"),
        (24, "I8"),
        (25, "I16"),
        (26, "I32"),
        (27, "I64"),
        (28, "F64"),
        (29, "IQ1_M"),
        (30, "BF16"),
        (34, "TQ1_0"),
        (35, "TQ2_0"),
        (39, "MXFP4"),
        (40, "NVFP4"),
        (41, "Q1_0"),
    ];
    NAMES.iter().find(|(id, _)| *id == type_id).map(|(_, n)| *n)
}

/// Bytes for `n` elements of type `type_id`; `None` if unknown, not whole blocks, or overflow.
pub(crate) fn bytes_for(type_id: u32, n: u64) -> Option<u64> {
    let (len, bytes) = layout(type_id)?;
    if n % len != 0 {
        return None;
    }
    (n / len).checked_mul(bytes)
}
