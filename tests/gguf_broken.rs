//! Regression corpus of broken GGUF files (tests/fixtures/gguf/broken/*.gguf), each named
//! after what is broken, and the error variant each must produce.
//!
//! Regenerate the corpus with `GGUF_REGEN_BROKEN=1 cargo test --test gguf_broken` (then run it
//! again: the corpus is compiled in, so the browser checks the same bytes).

mod common;

use fuselm::gguf::{
    GgmlType, Gguf, GgufError, GgufStreamReader, GgufWriter, MetadataArray as A, MetadataValue as V,
};

fn le64(v: u64) -> [u8; 8] {
    v.to_le_bytes()
}

/// Header bytes: magic, version, tensor count, kv count.
fn head(version: u32, n_tensors: u64, n_kv: u64) -> Vec<u8> {
    [
        &b"GGUF"[..],
        &version.to_le_bytes(),
        &le64(n_tensors),
        &le64(n_kv),
    ]
    .concat()
}

fn kv_start(key: &str, type_id: u32) -> Vec<u8> {
    [
        &le64(key.len() as u64)[..],
        key.as_bytes(),
        &type_id.to_le_bytes(),
    ]
    .concat()
}

fn one_tensor(name: &str, dims: &[u64], ty: GgmlType, bytes: usize) -> GgufWriter {
    let mut w = GgufWriter::new();
    w.add_str("general.name", "broken");
    w.add_tensor(name, dims, ty, vec![0; bytes]);
    w
}

/// Rewrites the (relative) data offset of tensor `name` in the directory.
fn patch_offset(mut file: Vec<u8>, name: &str, offset: u64) -> Vec<u8> {
    let at = file
        .windows(name.len())
        .position(|w| w == name.as_bytes())
        .unwrap()
        + name.len();
    let n_dims = u32::from_le_bytes(file[at..at + 4].try_into().unwrap()) as usize;
    let off_at = at + 4 + 8 * n_dims + 4;
    file[off_at..off_at + 8].copy_from_slice(&offset.to_le_bytes());
    file
}

fn two_tensors() -> Vec<u8> {
    let mut w = GgufWriter::new();
    w.add_tensor("a", &[16], GgmlType::F32, vec![0; 64]);
    w.add_tensor("b", &[16], GgmlType::F32, vec![0; 64]);
    w.to_bytes()
}

/// (file name, bytes, expected error variant).
fn cases() -> Vec<(&'static str, Vec<u8>, &'static str)> {
    let valid = one_tensor("t", &[32, 2], GgmlType::Q8_0, 68).to_bytes();
    let mut nested = Vec::new();
    for _ in 0..100 {
        nested.extend_from_slice(&9u32.to_le_bytes());
        nested.extend_from_slice(&le64(1));
    }
    let mut w_dup_key = GgufWriter::new();
    w_dup_key.add_u32("a.b", 1).add_u32("a.b", 2);
    let mut w_dup_t = GgufWriter::new();
    w_dup_t
        .add_tensor("x", &[4], GgmlType::F32, vec![0; 16])
        .add_tensor("x", &[4], GgmlType::F32, vec![0; 16]);
    let mut w_align_str = GgufWriter::new();
    w_align_str.add_str("general.alignment", "32");
    let mut w_unsup = GgufWriter::new();
    w_unsup.add_tensor_raw("t", &[32], 99, vec![0; 32]);
    let mut w_5d = GgufWriter::new();
    w_5d.add_tensor_raw("t", &[1, 1, 1, 1, 1], 0, vec![0; 4]);
    let mut w_0d = GgufWriter::new();
    w_0d.add_tensor_raw("t", &[], 0, vec![0; 4]);
    vec![
        (
            "bad_magic.gguf",
            [&b"GGML"[..], &valid[4..]].concat(),
            "BadMagic",
        ),
        (
            "version_1.gguf",
            [&b"GGUF"[..], &1u32.to_le_bytes(), &valid[8..]].concat(),
            "UnsupportedVersion",
        ),
        (
            "version_big_endian.gguf",
            [&b"GGUF"[..], &3u32.to_be_bytes(), &valid[8..]].concat(),
            "UnsupportedVersion",
        ),
        ("truncated_header.gguf", valid[..14].to_vec(), "Truncated"),
        (
            "truncated_tensor_offset.gguf",
            valid[..valid.len() - 68 - 40].to_vec(),
            "Truncated",
        ),
        (
            "kv_count_too_large.gguf",
            head(3, 0, 1 << 60),
            "CountTooLarge",
        ),
        (
            "tensor_count_too_large.gguf",
            head(3, u64::MAX, 0),
            "CountTooLarge",
        ),
        (
            "key_length_past_end.gguf",
            [
                head(3, 0, 1),
                le64(1 << 40).to_vec(),
                b"abcdefghijklmnop".to_vec(),
            ]
            .concat(),
            "LengthPastEnd",
        ),
        (
            "string_value_past_end.gguf",
            [head(3, 0, 1), kv_start("k", 8), le64(1000).to_vec()].concat(),
            "LengthPastEnd",
        ),
        (
            "array_count_past_end.gguf",
            [
                head(3, 0, 1),
                kv_start("k", 9),
                4u32.to_le_bytes().to_vec(),
                le64(1 << 50).to_vec(),
            ]
            .concat(),
            "CountTooLarge",
        ),
        (
            "unknown_value_type.gguf",
            [head(3, 0, 1), kv_start("k", 13), vec![0; 8]].concat(),
            "UnknownValueType",
        ),
        (
            "invalid_bool.gguf",
            [head(3, 0, 1), kv_start("k", 7), vec![2]].concat(),
            "InvalidBool",
        ),
        (
            "nested_array_bomb.gguf",
            [head(3, 0, 1), kv_start("k", 9), nested].concat(),
            "ArrayTooDeep",
        ),
        (
            "invalid_utf8_key.gguf",
            [
                head(3, 0, 1),
                le64(2).to_vec(),
                vec![0xff, 0xfe],
                4u32.to_le_bytes().to_vec(),
                vec![0; 4],
            ]
            .concat(),
            "InvalidUtf8",
        ),
        ("duplicate_key.gguf", w_dup_key.to_bytes(), "DuplicateKey"),
        (
            "alignment_zero.gguf",
            GgufWriter::new().alignment(0).to_bytes(),
            "InvalidAlignment",
        ),
        (
            "alignment_not_power_of_two.gguf",
            GgufWriter::new().alignment(48).to_bytes(),
            "InvalidAlignment",
        ),
        (
            "alignment_wrong_type.gguf",
            w_align_str.to_bytes(),
            "WrongType",
        ),
        (
            "unknown_tensor_type.gguf",
            w_unsup.to_bytes(),
            "UnknownTensorType",
        ),
        (
            "tensor_name_too_long.gguf",
            one_tensor(&"n".repeat(64), &[4], GgmlType::F32, 16).to_bytes(),
            "TensorNameTooLong",
        ),
        ("five_dims.gguf", w_5d.to_bytes(), "BadDimCount"),
        ("zero_dims.gguf", w_0d.to_bytes(), "BadDimCount"),
        (
            "zero_length_dim.gguf",
            one_tensor("t", &[32, 0], GgmlType::Q8_0, 0).to_bytes(),
            "ZeroDimension",
        ),
        (
            "dims_product_overflow.gguf",
            one_tensor("t", &[1 << 32, 1 << 32, 1 << 32], GgmlType::F32, 4).to_bytes(),
            "DimsOverflow",
        ),
        (
            "byte_size_overflow.gguf",
            one_tensor("t", &[1 << 31, 1 << 31], GgmlType::F32, 4).to_bytes(),
            "DimsOverflow",
        ),
        (
            "row_not_block_multiple.gguf",
            one_tensor("t", &[33, 2], GgmlType::Q8_0, 68).to_bytes(),
            "RowNotBlockMultiple",
        ),
        (
            "duplicate_tensor_name.gguf",
            w_dup_t.to_bytes(),
            "DuplicateTensorName",
        ),
        (
            "misaligned_tensor_offset.gguf",
            patch_offset(valid.clone(), "t", 4),
            "MisalignedTensor",
        ),
        (
            "overlapping_tensors.gguf",
            patch_offset(two_tensors(), "b", 32),
            "OverlappingTensors",
        ),
        (
            "tensor_offset_overflow.gguf",
            patch_offset(valid.clone(), "t", u64::MAX - 31),
            "OffsetOverflow",
        ),
        (
            "tensor_data_past_end.gguf",
            valid[..valid.len() - 1].to_vec(),
            "TensorDataPastEnd",
        ),
        (
            "tensor_offset_past_end.gguf",
            patch_offset(valid.clone(), "t", 1 << 20),
            "TensorDataPastEnd",
        ),
    ]
}

fn variant(e: &GgufError) -> String {
    let s = format!("{e:?}");
    s.split([' ', '{', '('])
        .next()
        .unwrap_or_default()
        .to_string()
}

/// The committed corpus, compiled in so that the browser checks the same bytes.
macro_rules! committed {
    ($($name:literal,)*) => {
        &[$(($name, include_bytes!(concat!("fixtures/gguf/broken/", $name)))),*]
    };
}
const COMMITTED: &[(&str, &[u8])] = committed![
    "alignment_not_power_of_two.gguf",
    "alignment_wrong_type.gguf",
    "alignment_zero.gguf",
    "array_count_past_end.gguf",
    "bad_magic.gguf",
    "byte_size_overflow.gguf",
    "dims_product_overflow.gguf",
    "duplicate_key.gguf",
    "duplicate_tensor_name.gguf",
    "five_dims.gguf",
    "invalid_bool.gguf",
    "invalid_utf8_key.gguf",
    "key_length_past_end.gguf",
    "kv_count_too_large.gguf",
    "misaligned_tensor_offset.gguf",
    "nested_array_bomb.gguf",
    "overlapping_tensors.gguf",
    "row_not_block_multiple.gguf",
    "string_value_past_end.gguf",
    "tensor_count_too_large.gguf",
    "tensor_data_past_end.gguf",
    "tensor_name_too_long.gguf",
    "tensor_offset_overflow.gguf",
    "tensor_offset_past_end.gguf",
    "truncated_header.gguf",
    "truncated_tensor_offset.gguf",
    "unknown_tensor_type.gguf",
    "unknown_value_type.gguf",
    "version_1.gguf",
    "version_big_endian.gguf",
    "zero_dims.gguf",
    "zero_length_dim.gguf",
];

fn check_broken_corpus_yields_expected_errors() {
    let cases = cases();
    let mut names: Vec<&str> = cases.iter().map(|c| c.0).collect();
    let mut committed: Vec<&str> = COMMITTED.iter().map(|c| c.0).collect();
    names.sort();
    committed.sort();
    // Every committed file has a recipe, and every recipe a committed file.
    assert_eq!(committed, names, "COMMITTED must list exactly the recipes");
    for (name, bytes, expected) in &cases {
        let file = COMMITTED.iter().find(|c| c.0 == *name).unwrap().1;
        assert_eq!(
            file, bytes,
            "{name}: committed file differs from its recipe"
        );
        let err = Gguf::parse(file).expect_err(name);
        assert_eq!(variant(&err), *expected, "{name}: {err}");
        assert!(!err.to_string().is_empty());
        // The stream reader fails too: with the same error, or as truncated data where
        // only the whole-file parse knows the file length.
        let mut r = GgufStreamReader::new();
        let stream_err = match r.push(file) {
            Err(e) => e,
            Ok(_) => r.finish().expect_err(name),
        };
        let sv = variant(&stream_err);
        assert!(
            sv == *expected || (sv == "Truncated" && expected.contains("PastEnd")),
            "{name}: stream gave {stream_err}"
        );
    }
}
cross_test!(
    broken_corpus_yields_expected_errors,
    check_broken_corpus_yields_expected_errors
);

/// Native only (it needs the filesystem): with `GGUF_REGEN_BROKEN` set, rewrites the corpus from
/// the recipes; always checks that the directory holds exactly `COMMITTED`, each file as listed.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn broken_corpus_directory_is_committed() {
    let dir = format!("{}/tests/fixtures/gguf/broken", env!("CARGO_MANIFEST_DIR"));
    if std::env::var_os("GGUF_REGEN_BROKEN").is_some() {
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes, _) in cases() {
            std::fs::write(format!("{dir}/{name}"), bytes).unwrap();
        }
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    on_disk.sort();
    let mut committed: Vec<&str> = COMMITTED.iter().map(|c| c.0).collect();
    committed.sort();
    assert_eq!(on_disk, committed, "add new corpus files to COMMITTED");
    for (name, bytes) in COMMITTED {
        let path = format!("{dir}/{name}");
        let file = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert!(
            file == *bytes,
            "{name}: rebuild to recompile the regenerated corpus"
        );
    }
}

fn check_inspectable_unsupported_type_and_nested_arrays_within_cap() {
    let mut w = GgufWriter::new();
    // Q8_K (id 15): a known block layout (256 values, 292 bytes) with no dequantizer.
    w.add_tensor_raw("q8k", &[256], 15, vec![0; 292]);
    let mut a = A::U8(vec![1]);
    for _ in 0..fuselm::gguf::MAX_ARRAY_DEPTH - 1 {
        a = A::Array(vec![a]);
    }
    w.add("deep", V::Array(a.clone()));
    let g = Gguf::parse(&w.to_bytes()).unwrap();
    assert_eq!(g.metadata().get("deep"), Some(&V::Array(a.clone())));
    assert!(matches!(
        g.tensor("q8k").unwrap().ggml_type(),
        Err(GgufError::UnsupportedTensorType { type_id: 15, .. })
    ));
    let mut w = GgufWriter::new();
    w.add("deeper", V::Array(A::Array(vec![a])));
    assert!(matches!(
        Gguf::parse(&w.to_bytes()),
        Err(GgufError::ArrayTooDeep { .. })
    ));
}
cross_test!(
    inspectable_unsupported_type_and_nested_arrays_within_cap,
    check_inspectable_unsupported_type_and_nested_arrays_within_cap
);
