//! Small synthetic models of every architecture family, shared by the tests that need one of
//! each (tests/context_shift.rs, tests/memory.rs).

use fuselm::gguf::GgmlType;
use fuselm::model::synthetic::SyntheticSpec;

/// One small synthetic model per architecture family with its RoPE variant: llama (adjacent
/// pairs), qwen2 (NeoX with Llama 3 frequency factors), gemma3 (Q/K and post norms, local and
/// global bases, linear scaling on the global layer), phi3 (fused tensors, LongRoPE past its
/// original 32 positions, untied head).
pub fn models() -> Vec<(&'static str, SyntheticSpec)> {
    vec![
        ("llama", SyntheticSpec::default()),
        (
            "qwen2",
            SyntheticSpec {
                arch: "qwen2",
                rope_freqs: true,
                n_layers: 2,
                n_embd: 192,
                n_head: 6,
                n_head_kv: 2,
                matrix_types: vec![GgmlType::Q8_0],
                seed: 12,
                ..SyntheticSpec::default()
            },
        ),
        (
            "gemma3",
            SyntheticSpec {
                arch: "gemma3",
                rope_scaling_linear: Some(8.0),
                n_layers: 6,
                n_ff: 256,
                n_head: 4,
                n_head_kv: 1,
                matrix_types: vec![GgmlType::Q8_0, GgmlType::Q5_0],
                seed: 14,
                ..SyntheticSpec::default()
            },
        ),
        (
            // LongRoPE past its original 32 positions: long factors and the attention factor
            // (applied once when a row is written, never again by a shift).
            "phi3",
            SyntheticSpec {
                arch: "phi3",
                long_rope: Some(32),
                n_layers: 2,
                n_head: 4,
                n_head_kv: 4,
                matrix_types: vec![GgmlType::Q8_0],
                tied: false,
                seed: 15,
                ..SyntheticSpec::default()
            },
        ),
    ]
}
