//! Dequantizers and quantizers against vectors produced by the independent `gguf` PyPI
//! package (scripts/gguf-test-vectors.py), plus hand-built blocks with known values.
//!
//! Native only (the native lane owns this); in the browser, every format is dequantized on the GPU
//! by tests/kernel_matmul.rs and tests/kernels.rs.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use fuselm::gguf::{
    dequantize, dequantize_row_into, f16_to_f32, f32_to_f16, quantize_bf16, quantize_q2_k,
    quantize_q3_k, quantize_q4_0, quantize_q4_1, quantize_q4_k, quantize_q5_0, quantize_q5_1,
    quantize_q5_k, quantize_q6_k, quantize_q8_0, GgmlType, GgufError,
};
use serde_json::Value;

/// tests/fixtures/gguf/{name}, compiled in so that the browser runs the same vectors.
fn fixture(name: &str) -> Value {
    let text = match name {
        "dequant_F32.json" => include_str!("fixtures/gguf/dequant_F32.json"),
        "dequant_F16.json" => include_str!("fixtures/gguf/dequant_F16.json"),
        "dequant_BF16.json" => include_str!("fixtures/gguf/dequant_BF16.json"),
        "dequant_Q8_0.json" => include_str!("fixtures/gguf/dequant_Q8_0.json"),
        "dequant_Q4_0.json" => include_str!("fixtures/gguf/dequant_Q4_0.json"),
        "dequant_Q4_1.json" => include_str!("fixtures/gguf/dequant_Q4_1.json"),
        "dequant_Q4_K.json" => include_str!("fixtures/gguf/dequant_Q4_K.json"),
        "dequant_Q6_K.json" => include_str!("fixtures/gguf/dequant_Q6_K.json"),
        "dequant_Q5_0.json" => include_str!("fixtures/gguf/dequant_Q5_0.json"),
        "dequant_Q5_1.json" => include_str!("fixtures/gguf/dequant_Q5_1.json"),
        "dequant_Q5_K.json" => include_str!("fixtures/gguf/dequant_Q5_K.json"),
        "dequant_Q2_K.json" => include_str!("fixtures/gguf/dequant_Q2_K.json"),
        "dequant_Q3_K.json" => include_str!("fixtures/gguf/dequant_Q3_K.json"),
        "quant_Q5_0.json" => include_str!("fixtures/gguf/quant_Q5_0.json"),
        "quant_Q5_1.json" => include_str!("fixtures/gguf/quant_Q5_1.json"),
        "quant_Q8_0.json" => include_str!("fixtures/gguf/quant_Q8_0.json"),
        "quant_Q4_0.json" => include_str!("fixtures/gguf/quant_Q4_0.json"),
        "quant_Q4_1.json" => include_str!("fixtures/gguf/quant_Q4_1.json"),
        "f32_to_f16.json" => include_str!("fixtures/gguf/f32_to_f16.json"),
        _ => panic!("no fixture tests/fixtures/gguf/{name}"),
    };
    serde_json::from_str(text).unwrap()
}

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn u32s(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

fn check_dequant(ty: GgmlType, max_rel: f32) {
    let v = fixture(&format!("dequant_{}.json", ty.name()));
    assert_eq!(v["type_id"].as_u64().unwrap() as u32, ty.id());
    let data = hex(v["data_hex"].as_str().unwrap());
    let n = v["n_elements"].as_u64().unwrap() as usize;
    let expected = u32s(&v["expected_f32_bits"]);
    let got = dequantize(ty, &data, n).unwrap();
    assert_eq!(got.len(), expected.len());
    for (i, (g, &e)) in got.iter().zip(&expected).enumerate() {
        let e = f32::from_bits(e);
        if max_rel == 0.0 || e.is_nan() {
            assert!(
                g.to_bits() == e.to_bits() || (g.is_nan() && e.is_nan()),
                "{ty} elem {i}: {g} != {e}"
            );
        } else {
            assert!(
                (g - e).abs() <= max_rel * e.abs().max(f32::MIN_POSITIVE),
                "{ty} elem {i}: {g} vs {e}"
            );
        }
    }
    // Row-wise decoding into a caller buffer gives the same values.
    let mut row = vec![0.0f32; ty.block_len()];
    dequantize_row_into(ty, &data[..ty.block_bytes()], &mut row).unwrap();
    assert_eq!(
        row.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        got[..ty.block_len()]
            .iter()
            .map(|x| x.to_bits())
            .collect::<Vec<_>>()
    );
}

fn check_dequant_exact_types_match_gguf_py() {
    for ty in [
        GgmlType::F32,
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
    ] {
        check_dequant(ty, 0.0);
    }
}
cross_test!(
    dequant_exact_types_match_gguf_py,
    check_dequant_exact_types_match_gguf_py
);

fn check_dequant_k_quants_match_gguf_py() {
    // Same f32 operation order as ggml, so these are in fact bit-exact; 1e-6 is the contract.
    for ty in [
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ] {
        check_dequant(ty, 1e-6);
        check_dequant(ty, 0.0);
    }
}
cross_test!(
    dequant_k_quants_match_gguf_py,
    check_dequant_k_quants_match_gguf_py
);

fn check_quantizers_match_ggml_reference() {
    type Quantizer = fn(&[f32]) -> Vec<u8>;
    let cases: [(&str, Quantizer); 5] = [
        ("Q8_0", quantize_q8_0),
        ("Q4_0", quantize_q4_0),
        ("Q4_1", quantize_q4_1),
        ("Q5_0", quantize_q5_0),
        ("Q5_1", quantize_q5_1),
    ];
    for (name, quantize) in cases {
        let v = fixture(&format!("quant_{name}.json"));
        let x: Vec<f32> = u32s(&v["input_f32_bits"])
            .into_iter()
            .map(f32::from_bits)
            .collect();
        assert_eq!(
            quantize(&x),
            hex(v["expected_hex"].as_str().unwrap()),
            "{name}"
        );
    }
}
cross_test!(
    quantizers_match_ggml_reference,
    check_quantizers_match_ggml_reference
);

fn check_f32_to_f16_matches_numpy() {
    let v = fixture("f32_to_f16.json");
    let inputs = u32s(&v["input_f32_bits"]);
    let expected = u32s(&v["expected_f16_bits"]);
    for (x, e) in inputs.into_iter().zip(expected) {
        assert_eq!(
            f32_to_f16(f32::from_bits(x)),
            e as u16,
            "input {}",
            f32::from_bits(x)
        );
    }
}
cross_test!(f32_to_f16_matches_numpy, check_f32_to_f16_matches_numpy);

fn f16(x: f32) -> [u8; 2] {
    f32_to_f16(x).to_le_bytes()
}

fn check_q4_0_every_nibble_pattern() {
    // d = 1: element j is (low nibble of byte j) - 8, element j+16 is (high nibble) - 8.
    for pattern in 0..=255u8 {
        let mut block = f16(1.0).to_vec();
        block.extend((0..16u8).map(|j| pattern.wrapping_add(j.wrapping_mul(17))));
        let y = dequantize(GgmlType::Q4_0, &block, 32).unwrap();
        for j in 0..16 {
            let b = block[2 + j];
            assert_eq!(y[j], f32::from(b & 15) - 8.0);
            assert_eq!(y[j + 16], f32::from(b >> 4) - 8.0);
        }
    }
}
cross_test!(q4_0_every_nibble_pattern, check_q4_0_every_nibble_pattern);

fn check_q4_1_and_q8_0_known_values() {
    let mut block = [f16(0.5), f16(-2.0)].concat();
    block.extend((0..16u8).map(|j| j | ((15 - j) << 4)));
    let y = dequantize(GgmlType::Q4_1, &block, 32).unwrap();
    for j in 0..16 {
        assert_eq!(y[j], j as f32 * 0.5 - 2.0);
        assert_eq!(y[j + 16], (15 - j) as f32 * 0.5 - 2.0);
    }
    let mut block = f16(0.25).to_vec();
    block.extend((0..32).map(|j: i32| ((j * 8) - 128) as i8 as u8));
    let y = dequantize(GgmlType::Q8_0, &block, 32).unwrap();
    for (j, v) in y.iter().enumerate() {
        assert_eq!(*v, ((j as i32 * 8) - 128) as f32 * 0.25);
    }
}
cross_test!(q4_1_and_q8_0_known_values, check_q4_1_and_q8_0_known_values);

fn check_q4_k_known_scales() {
    // d = 1, dmin = 1; sub-block s (0..8) gets scale s + 1 and min s, all nibbles = s % 16
    // (low nibbles belong to even sub-blocks, high nibbles to odd ones).
    let (sc, mn): (Vec<u8>, Vec<u8>) = (0..8u8)
        .map(|s| (s + 1 + 50 * (s / 4), s + 40 * (s / 4)))
        .unzip();
    let mut scales = [0u8; 12];
    for j in 0..4 {
        scales[j] = sc[j] | ((sc[j + 4] >> 4) << 6);
        scales[j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6);
        scales[j + 8] = (sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4);
    }
    let mut block = [f16(1.0), f16(1.0)].concat();
    block.extend_from_slice(&scales);
    for chunk in 0..4u8 {
        block.extend(std::iter::repeat_n(
            (2 * chunk) | ((2 * chunk + 1) << 4),
            32,
        ));
    }
    let y = dequantize(GgmlType::Q4_K, &block, 256).unwrap();
    for (i, v) in y.iter().enumerate() {
        let s = i / 32;
        assert_eq!(
            *v,
            f32::from(sc[s]) * s as f32 - f32::from(mn[s]),
            "element {i}"
        );
    }
}
cross_test!(q4_k_known_scales, check_q4_k_known_scales);

fn check_q6_k_known_values() {
    // q = 6-bit value (i % 64) for element i, scales 1..=16, d = 0.5: x = 0.5 * sc * (q - 32).
    let mut ql = [0u8; 128];
    let mut qh = [0u8; 64];
    let q = |i: usize| (i % 64) as u8;
    for half in 0..2 {
        for l in 0..32 {
            let base = 128 * half;
            let (q1, q2, q3, q4) = (
                q(base + l),
                q(base + l + 32),
                q(base + l + 64),
                q(base + l + 96),
            );
            ql[64 * half + l] = (q1 & 15) | ((q3 & 15) << 4);
            ql[64 * half + l + 32] = (q2 & 15) | ((q4 & 15) << 4);
            qh[32 * half + l] = (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
    let scales: Vec<u8> = (0..16).map(|s: i8| (s + 1 - 8) as u8).collect();
    let block = [&ql[..], &qh[..], &scales[..], &f16(0.5)[..]].concat();
    let y = dequantize(GgmlType::Q6_K, &block, 256).unwrap();
    for (i, v) in y.iter().enumerate() {
        let sc = f32::from(scales[i / 16] as i8);
        assert_eq!(*v, 0.5 * sc * (f32::from(q(i)) - 32.0), "element {i}");
    }
}
cross_test!(q6_k_known_values, check_q6_k_known_values);

fn check_dequant_size_errors() {
    assert!(matches!(
        dequantize(GgmlType::Q4_0, &[0; 18], 31),
        Err(GgufError::NotBlockMultiple { .. })
    ));
    assert!(matches!(
        dequantize(GgmlType::Q4_0, &[0; 17], 32),
        Err(GgufError::DataSizeMismatch { .. })
    ));
    assert!(matches!(
        dequantize(GgmlType::F32, &[0; 4], usize::MAX),
        Err(GgufError::DataSizeMismatch { .. })
    ));
    assert!(matches!(
        dequantize(GgmlType::Q6_K, &[0; 210], usize::MAX - 255),
        Err(GgufError::DataSizeMismatch { .. })
    ));
    assert_eq!(f16_to_f32(0x3c00), 1.0);
}
cross_test!(dequant_size_errors, check_dequant_size_errors);

/// The plain K-quant and BF16 quantizers (synthetic models and tests) round-trip through the
/// dequantizers within their step: Q4_K's 4-bit steps of ≤ 2/15 plus its 6-bit scales (Q5_K's
/// 5-bit steps, half that), Q6_K's 6-bit steps of ≤ 1/31, Q2_K's 2-bit steps of ≤ 2/3 with
/// 4-bit scales and mins, Q3_K's steps of ≤ 1/4 (absmax over -4..3: the largest positive
/// value clamps to 3 steps), BF16's 8-bit mantissa. A zero-padded partial superblock and an
/// all-zero one decode to zeros.
fn check_k_quantizers_round_trip() {
    let mut s = 0x1234_5678u32;
    let x: Vec<f32> = (0..700)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            s as f32 / u32::MAX as f32 * 2.0 - 1.0
        })
        .collect();
    let padded = |v: &[f32]| [v, &vec![0.0; 768 - v.len()][..]].concat();
    for (ty, bytes, tol) in [
        (GgmlType::Q4_K, quantize_q4_k(&x), 0.1f32),
        (GgmlType::Q5_K, quantize_q5_k(&x), 0.05),
        (GgmlType::Q6_K, quantize_q6_k(&x), 0.025),
        (GgmlType::Q2_K, quantize_q2_k(&x), 0.45),
        (GgmlType::Q3_K, quantize_q3_k(&x), 0.3),
    ] {
        assert_eq!(bytes.len(), 3 * ty.block_bytes(), "{ty}");
        let y = dequantize(ty, &bytes, 768).unwrap();
        let want = padded(&x);
        let worst = y
            .iter()
            .zip(&want)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        assert!(worst <= tol, "{ty}: max error {worst} > {tol}");
        assert!(worst > 0.0, "{ty}: lossless is suspicious");
        let zeros = dequantize(
            ty,
            &(match ty {
                GgmlType::Q4_K => quantize_q4_k(&[0.0; 256]),
                GgmlType::Q5_K => quantize_q5_k(&[0.0; 256]),
                GgmlType::Q2_K => quantize_q2_k(&[0.0; 256]),
                GgmlType::Q3_K => quantize_q3_k(&[0.0; 256]),
                _ => quantize_q6_k(&[0.0; 256]),
            }),
            256,
        )
        .unwrap();
        assert!(zeros.iter().all(|&v| v == 0.0), "{ty}: zeros");
    }
    let y = dequantize(GgmlType::BF16, &quantize_bf16(&x), x.len()).unwrap();
    for (a, b) in y.iter().zip(&x) {
        assert!((a - b).abs() <= b.abs() / 256.0, "bf16 {a} vs {b}");
    }
    assert_eq!(
        quantize_bf16(&[1.0 + 1.0 / 256.0]),
        [0x80, 0x3f],
        "ties round to even"
    );
}
cross_test!(k_quantizers_round_trip, check_k_quantizers_round_trip);
