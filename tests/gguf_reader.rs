//! Reader, metadata and stream-reader behaviour on writer-built files and the real model.

mod common;

use fuselm::gguf::{
    dequantize_tensor, quantize_q4_1, quantize_q8_0, GgmlType, Gguf, GgufError, GgufStreamReader,
    GgufWriter, MetadataArray as A, MetadataValue as V, StreamEvent,
};

fn all_value_types() -> Vec<(&'static str, V)> {
    vec![
        ("t.u8", V::U8(200)),
        ("t.i8", V::I8(-100)),
        ("t.u16", V::U16(60000)),
        ("t.i16", V::I16(-30000)),
        ("t.u32", V::U32(4_000_000_000)),
        ("t.i32", V::I32(-2_000_000_000)),
        ("t.f32", V::F32(1.5)),
        ("t.bool", V::Bool(true)),
        ("t.string", V::String("héllo".into())),
        ("t.u64", V::U64(u64::MAX)),
        ("t.i64", V::I64(i64::MIN)),
        ("t.f64", V::F64(-2.25)),
        ("t.empty_str", V::String(String::new())),
        ("t.arr_u8", V::Array(A::U8(vec![1, 2, 3]))),
        ("t.arr_i8", V::Array(A::I8(vec![-1, 2]))),
        ("t.arr_u16", V::Array(A::U16(vec![7]))),
        ("t.arr_i16", V::Array(A::I16(vec![-7]))),
        ("t.arr_u32", V::Array(A::U32(vec![9, 10]))),
        ("t.arr_i32", V::Array(A::I32(vec![-9, 10]))),
        ("t.arr_f32", V::Array(A::F32(vec![0.5, -0.25]))),
        ("t.arr_bool", V::Array(A::Bool(vec![true, false]))),
        (
            "t.arr_str",
            V::Array(A::String(vec!["a".into(), "".into(), "ccc".into()])),
        ),
        ("t.arr_u64", V::Array(A::U64(vec![1 << 40]))),
        ("t.arr_i64", V::Array(A::I64(vec![-(1 << 40)]))),
        ("t.arr_f64", V::Array(A::F64(vec![1e300]))),
        ("t.arr_empty", V::Array(A::F32(vec![]))),
        (
            "t.nested",
            V::Array(A::Array(vec![
                A::U8(vec![1]),
                A::String(vec!["x".into()]),
                A::Array(vec![A::I32(vec![-1])]),
            ])),
        ),
    ]
}

/// A small file exercising every metadata type and several tensor types, alignment 64.
fn sample_file(version: u32) -> Vec<u8> {
    let mut w = GgufWriter::new().version(version).alignment(64);
    for (k, v) in all_value_types() {
        w.add(k, v);
    }
    let x: Vec<f32> = (0..256).map(|i| (i as f32 * 0.37).sin()).collect();
    w.add_tensor_f32("a.f32", &[3, 5], &x[..15]);
    w.add_tensor("b.q8", &[64, 2], GgmlType::Q8_0, quantize_q8_0(&x[..128]));
    w.add_tensor("c.q41", &[32], GgmlType::Q4_1, quantize_q4_1(&x[..32]));
    w.add_tensor_raw("d.iq4_nl", &[32, 3], 20, vec![7; 54]); // IQ4_NL: parsed, not decodable
    w.add_tensor("e.f16", &[7], GgmlType::F16, [0x00, 0x3c].repeat(7));
    w.to_bytes()
}

fn check_metadata_round_trips_every_type() {
    for version in [2, 3] {
        let g = Gguf::parse(&sample_file(version)).unwrap();
        assert_eq!(g.version, version);
        assert_eq!(g.alignment, 64);
        let md = g.metadata();
        let expected = all_value_types();
        // File order is preserved (general.alignment was added first).
        let keys: Vec<&str> = md.iter().map(|(k, _)| k).skip(1).collect();
        assert_eq!(keys, expected.iter().map(|(k, _)| *k).collect::<Vec<_>>());
        for (k, v) in expected {
            assert_eq!(md.get(k), Some(&v), "{k}");
        }
    }
}
cross_test!(
    metadata_round_trips_every_type,
    check_metadata_round_trips_every_type
);

fn check_typed_getters() {
    let g = Gguf::parse(&sample_file(3)).unwrap();
    let md = g.metadata();
    assert_eq!(md.get_u32("t.u8").unwrap(), 200);
    assert_eq!(md.get_u64("t.u32").unwrap(), 4_000_000_000);
    assert_eq!(
        md.get_u32("t.i8"),
        Err(GgufError::InvalidValue {
            key: "t.i8".into(),
            reason: "-100 does not fit in u32".into()
        })
    );
    assert!(matches!(
        md.get_u32("t.u64"),
        Err(GgufError::InvalidValue { .. })
    ));
    assert_eq!(md.get_f32("t.f64").unwrap(), -2.25);
    assert!(md.get_bool("t.bool").unwrap());
    assert_eq!(md.get_str("t.string").unwrap(), "héllo");
    assert_eq!(md.get_str_array("t.arr_str").unwrap(), ["a", "", "ccc"]);
    assert_eq!(md.get_f32_array("t.arr_f32").unwrap(), [0.5, -0.25]);
    assert_eq!(md.get_i32_array("t.arr_i32").unwrap(), [-9, 10]);
    assert_eq!(
        md.get_str("t.u32"),
        Err(GgufError::WrongType {
            key: "t.u32".into(),
            expected: "string",
            found: "u32".into()
        })
    );
    assert_eq!(
        md.get_f32_array("t.arr_str"),
        Err(GgufError::WrongType {
            key: "t.arr_str".into(),
            expected: "array<f32>",
            found: "array<string>".into()
        })
    );
    assert_eq!(
        md.get_u32("nope"),
        Err(GgufError::MissingKey { key: "nope".into() })
    );
    let msg = md.get_str("t.u32").unwrap_err().to_string();
    assert!(msg.contains("t.u32") && msg.contains("string"), "{msg}");
}
cross_test!(typed_getters, check_typed_getters);

fn check_tensor_directory_and_data() {
    let file = sample_file(3);
    let g = Gguf::parse(&file).unwrap();
    assert_eq!(g.tensors().len(), 5);
    assert_eq!(g.data_offset % 64, 0);
    assert!(g.data_offset >= g.header_len);
    for t in g.tensors() {
        assert_eq!(t.offset % 64, 0, "{}", t.name);
    }
    let a = g.tensor("a.f32").unwrap();
    assert_eq!(
        (
            a.dims.as_slice(),
            a.ty,
            a.size_bytes,
            a.n_elements,
            a.n_rows()
        ),
        (&[3, 5][..], Some(GgmlType::F32), 60, 15, 5)
    );
    let vals = dequantize_tensor(a, g.tensor_data(&file, a).unwrap()).unwrap();
    assert_eq!(vals[14], (14.0f32 * 0.37).sin());
    let e = g.tensor("e.f16").unwrap();
    assert_eq!(
        dequantize_tensor(e, g.tensor_data(&file, e).unwrap()).unwrap(),
        vec![1.0; 7]
    );
    // Unsupported-but-known type: inspectable, fails only when decoded.
    let d = g.tensor("d.iq4_nl").unwrap();
    assert_eq!((d.type_id, d.ty, d.size_bytes), (20, None, 54));
    let err = GgufError::UnsupportedTensorType {
        name: "d.iq4_nl".into(),
        type_id: 20,
    };
    assert_eq!(d.ggml_type(), Err(err.clone()));
    assert_eq!(
        dequantize_tensor(d, g.tensor_data(&file, d).unwrap()),
        Err(err)
    );
    // tensor_data bounds-checks against the slice it is given.
    assert!(matches!(
        g.tensor_data(&file[..file.len() - 1], e),
        Err(GgufError::TensorDataPastEnd { .. })
    ));
}
cross_test!(tensor_directory_and_data, check_tensor_directory_and_data);

fn check_parse_header_needs_exactly_the_directory() {
    let file = sample_file(3);
    let g = Gguf::parse(&file).unwrap();
    for len in 0..g.header_len as usize {
        assert_eq!(Gguf::parse_header(&file[..len]), Ok(None), "prefix {len}");
    }
    let (h, off) = Gguf::parse_header(&file[..g.header_len as usize])
        .unwrap()
        .unwrap();
    assert_eq!((h, off as u64), (g.clone(), g.data_offset));
    // A whole-file parse of a prefix reports precise truncation instead.
    // (a length or count that no longer fits is reported as such).
    assert!(matches!(
        Gguf::parse(&file[..100]),
        Err(GgufError::LengthPastEnd { .. } | GgufError::CountTooLarge { .. })
    ));
    assert!(matches!(
        Gguf::parse(&file[..20]),
        Err(GgufError::Truncated { .. })
    ));
}
cross_test!(
    parse_header_needs_exactly_the_directory,
    check_parse_header_needs_exactly_the_directory
);

/// Feeds `file` in `chunk`-sized pieces; returns the header and tensors by directory index.
type TensorBytes = Vec<Option<Vec<u8>>>;

fn stream(file: &[u8], chunk: usize) -> Result<(Gguf, TensorBytes), GgufError> {
    let mut r = GgufStreamReader::new();
    let mut events = Vec::new();
    for c in file.chunks(chunk) {
        events.extend(r.push(c)?);
    }
    events.extend(r.finish()?);
    let mut it = events.into_iter();
    let Some(StreamEvent::Header(g)) = it.next() else {
        panic!("first event must be the header")
    };
    let mut data = vec![None; g.tensors().len()];
    let mut last_offset = 0;
    for e in it {
        let StreamEvent::Tensor { index, data: d } = e else {
            panic!("second header")
        };
        assert!(
            g.tensors()[index].offset >= last_offset,
            "tensors must come in offset order"
        );
        last_offset = g.tensors()[index].offset;
        assert!(
            data[index].replace(d).is_none(),
            "tensor {index} emitted twice"
        );
    }
    Ok((*g, data))
}

fn assert_stream_matches_parse(file: &[u8], chunks: &[usize]) {
    let g = Gguf::parse(file).unwrap();
    for &chunk in chunks {
        let (h, data) = stream(file, chunk).unwrap();
        assert_eq!(h, g, "chunk {chunk}");
        for (t, d) in g.tensors().iter().zip(&data) {
            assert_eq!(
                d.as_deref(),
                Some(g.tensor_data(file, t).unwrap()),
                "chunk {chunk} tensor {}",
                t.name
            );
        }
    }
}

fn check_stream_in_chunks_equals_parse() {
    let mut file = sample_file(3);
    file.extend_from_slice(&[0xAB; 10]); // trailing bytes are ignored by both
    assert_stream_matches_parse(&file, &[1, 2, 7, 64, 4096, file.len()]);
}
cross_test!(
    stream_in_chunks_equals_parse,
    check_stream_in_chunks_equals_parse
);

fn check_stream_emits_header_and_tensors_early_and_reports_truncation() {
    let file = sample_file(3);
    let g = Gguf::parse(&file).unwrap();
    let mut r = GgufStreamReader::new();
    // The header is reported once the directory (plus at most half again) has arrived.
    let mut at = 0;
    while at < file.len() {
        at += 1;
        if !r.push(&file[at - 1..at]).unwrap().is_empty() {
            break;
        }
    }
    assert!(
        at as u64 >= g.header_len && at as u64 <= g.header_len * 3 / 2 + 1,
        "header after {at} bytes"
    );
    let cut = file.len() - 1; // the last tensor ends at the end of the file
    r.push(&file[at..cut]).unwrap();
    assert_eq!(r.bytes_received(), cut as u64);
    assert!(matches!(
        r.finish(),
        Err(GgufError::Truncated {
            what: "tensor data",
            ..
        })
    ));
    // Truncated inside the header.
    let mut r = GgufStreamReader::new();
    r.push(&file[..50]).unwrap();
    assert!(matches!(r.finish(), Err(GgufError::Truncated { .. })));
    // Errors are sticky.
    let mut r = GgufStreamReader::new();
    assert!(matches!(
        r.push(b"GGML\x03\0\0\0"),
        Err(GgufError::BadMagic { .. })
    ));
    assert!(matches!(r.push(&file), Err(GgufError::BadMagic { .. })));
}
cross_test!(
    stream_emits_header_and_tensors_early_and_reports_truncation,
    check_stream_emits_header_and_tensors_early_and_reports_truncation
);

/// The real SmolLM2 file, read natively and fetched in the browser (`common::default_model_bytes`).
async fn check_real_smollm2_file() {
    let file = common::default_model_bytes().await;
    let g = Gguf::parse(&file).unwrap();
    assert_eq!(
        (
            g.version,
            g.alignment,
            g.tensors().len(),
            g.metadata().len()
        ),
        (3, 32, 272, 33)
    );
    assert_eq!(
        g.metadata().get_str("general.architecture").unwrap(),
        "llama"
    );
    assert_eq!(
        g.metadata()
            .get_str_array("tokenizer.ggml.tokens")
            .unwrap()
            .len(),
        49152
    );
    let emb = g.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (emb.dims.as_slice(), emb.ty, emb.offset),
        (&[576, 49152][..], Some(GgmlType::Q8_0), 1785664)
    );
    for name in [
        "blk.0.attn_q.weight",
        "blk.29.ffn_down.weight",
        "output_norm.weight",
    ] {
        let t = g.tensor(name).unwrap();
        let v = dequantize_tensor(t, g.tensor_data(&file, t).unwrap()).unwrap();
        assert!(
            v.iter().all(|x| x.is_finite()) && v.iter().any(|&x| x != 0.0),
            "{name}"
        );
    }
    assert_stream_matches_parse(&file, &[4096, 1 << 20]);
}
cross_test!(async real_smollm2_file, check_real_smollm2_file);

fn check_huge_alignment_is_not_header_size() {
    // Fuzz finding: a legal 2^30 alignment put data_offset past the stream's header limit,
    // so the stream rejected a file the whole-file parse accepted. Padding is never buffered.
    let file = GgufWriter::new().alignment(1 << 30).to_bytes();
    let g = Gguf::parse(&file).unwrap();
    assert_eq!(g.data_offset, 1 << 30);
    assert_eq!(stream(&file, 5).unwrap().0, g);
    assert_eq!(
        Gguf::parse_header(&file)
            .unwrap()
            .map(|(h, o)| (h, o as u64)),
        Some((g, 1 << 30))
    );
    let mut w = GgufWriter::new().alignment(1 << 20); // the writer really pads: keep it 1 MiB
    w.add_tensor("t", &[4], GgmlType::F32, vec![0; 16]);
    let file = w.to_bytes();
    assert!(matches!(
        Gguf::parse(&file[..100]),
        Err(GgufError::TensorDataPastEnd { .. })
    ));
    assert!(matches!(
        stream(&file[..100], 7),
        Err(GgufError::Truncated { .. })
    ));
}
cross_test!(
    huge_alignment_is_not_header_size,
    check_huge_alignment_is_not_header_size
);

/// What a server answers instead of a model gets a hint, not only its bytes.
fn files_servers_answer_with_are_named() {
    let message = |bytes: &[u8]| match Gguf::parse(bytes) {
        Err(e @ GgufError::BadMagic { .. }) => e.to_string(),
        other => panic!("{:?}", other.map(|_| ())),
    };
    assert!(message(b"<!DOCTYPE html><html>").contains("the server returned an HTML page"));
    assert!(message(b"<html><body>").contains("HTML page"));
    assert!(message(br#"{"error":"not found"}"#).contains("looks like JSON"));
    assert!(message(b"<?xml version='1.0'?>").contains("XML"));
    assert!(
        !message(b"GGML\x03\0\0\0").contains(';'),
        "no hint for other files"
    );
}
cross_test!(
    files_servers_answer_with,
    files_servers_answer_with_are_named
);
