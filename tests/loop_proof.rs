//! The loop-termination prover (`fuselm::gpu::loop_proof`) that lets `GpuContext::shader` compile
//! fuselm's kernels without Naga's forced loop bounding: what it accepts and rejects, and that
//! every kernel fuselm compiles for a model (every weight format, architecture and strategy)
//! is proved. Native only: browsers compile WGSL themselves.
#![cfg(not(target_arch = "wasm32"))]

use fuselm::gguf::GgmlType;
use fuselm::gpu::loop_proof::{prove_wgsl, Proof, ProofLimits, Unproven, PARAM_LIMIT};
use fuselm::gpu::GpuContext;
use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use fuselm::model::{GpuModel, LoadOptions, Strategy};

/// WebGPU's default workgroup count per dimension and 4 GiB bindings.
const LIMITS: ProofLimits = ProofLimits {
    max_workgroups_per_dimension: 65535,
    max_storage_buffer_binding_size: 1 << 32,
};

const HEAD: &str = "
struct P { n: u32, step: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> buf: array<u32>;
@group(0) @binding(2) var<storage, read> ro: array<u32>;
fn bump(x: ptr<function, u32>) { *x = 0u; }
";

/// `body` inside `main` (with `lid`, `nwg` and a float `x` in scope).
fn kernel(body: &str) -> String {
    format!(
        "{HEAD}
@compute @workgroup_size(64)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(num_workgroups) nwg: vec3<u32>) {{
    var x = 3.0;
    var acc = 0u;
{body}
    buf[0] = acc;
}}"
    )
}

fn accepts(body: &str) -> Proof {
    let src = kernel(body);
    match prove_wgsl(&src, &LIMITS) {
        Ok(proof) => {
            assert!(proof.loops >= 1, "no loop found in:\n{body}");
            proof
        }
        Err(e) => panic!("rejected:\n{body}\n{}", e.describe(Some(&src))),
    }
}

fn rejects(body: &str, why: &str) -> Unproven {
    let src = kernel(body);
    match prove_wgsl(&src, &LIMITS) {
        Ok(_) => panic!("accepted:\n{body}"),
        Err(e) => {
            let text = e.describe(Some(&src));
            assert!(
                text.contains(why),
                "{body}\nrejected for another reason: {text}"
            );
            assert!(text.contains("function `main`"), "{text}");
            e
        }
    }
}

#[test]
fn accepts_counted_loops() {
    accepts("for (var i = 0u; i < 16u; i++) { acc += i; }");
    accepts("for (var i = lid; i < 1000u; i += 64u) { acc += i; }");
    accepts("for (var i = lid; i < arrayLength(&buf); i += nwg.x * 64u) { acc += buf[i]; }");
    // ...a step that could wrap to 0 if a device allowed 2^26 workgroups:
    let grid =
        kernel("for (var i = lid; i < arrayLength(&buf); i += nwg.x * 64u) { acc += buf[i]; }");
    let e = prove_wgsl(&grid, &ProofLimits::WORST).unwrap_err();
    assert!(e.reason.contains("step of `i` may be 0"), "{e}");
    accepts("for (var s = 32u; s > 0u; s >>= 1u) { acc += s; }");
    accepts("for (var s = 32u; s != 0u; s = s / 2u) { acc += s; }");
    accepts("for (var k = 2u; k <= 1024u; k <<= 1u) { acc += k; }");
    accepts("var k = 1u; for (; k < 0x80000000u; k <<= 1u) { acc += k; }");
    accepts("for (var i = 0u; i < 64u && x > 1.0; i++) { x -= 1.0; }");
    accepts("var j = lid; for (; j + 12u < p.n; j += 16u) { acc += j; } for (; j < p.n; j += 4u) { acc += j; }");
    accepts("var i = 0u; loop { if i >= 10u { break; } acc += i; continuing { i++; } }");
    accepts("for (var i = 0u; i < 8u; i++) { for (var j = 0u; j <= i; j++) { acc += j; } }");
    // A bound from a local variable that the loop does not write; a step of 1 needs no bound.
    accepts("var n = p.n; for (var i = 0u; i < n; i++) { acc += i; }");
    accepts("for (var i = 0u; i < ro[0]; i++) { acc += i; }");
    // Barriers and atomics inside a counted loop.
    accepts("for (var i = 0u; i < 4u; i++) { workgroupBarrier(); acc += i; }");
    // Uniform bounds: assumed below PARAM_LIMIT, and listed.
    let proof = accepts("for (var i = lid; i < p.n; i += 64u) { acc += i; }");
    assert_eq!(proof.assumptions.iter().collect::<Vec<_>>(), ["p.n"]);
    // A counter below its loop's bound, passed to a function that counts up to it.
    let src = format!(
        "{HEAD}
fn inner(c: u32) -> u32 {{ var s = 0u; for (var j = 0u; j <= c; j += 8u) {{ s += j; }} return s; }}
@compute @workgroup_size(1) fn main() {{
    var acc = 0u;
    for (var c = 0u; c < min(p.n, 4096u); c++) {{ acc += inner(c); }}
    buf[0] = acc;
}}"
    );
    let proof = prove_wgsl(&src, &LIMITS).unwrap_or_else(|e| panic!("{}", e.describe(Some(&src))));
    assert_eq!(proof.loops, 2);
}

#[test]
fn rejects_loops_it_cannot_prove() {
    rejects("loop { acc += 1u; }", "does not start with its test");
    rejects("while (true) { acc += 1u; }", "no conjunct");
    rejects(
        "for (var i = 0u; ; i++) { acc += i; }",
        "does not start with its test",
    );
    rejects(
        "for (var i = 0u; i < 10u; i += p.step) { acc += i; }",
        "step of `i` may be 0",
    );
    rejects(
        "for (var i = 0u; i < 10u; i++) { i = 0u; }",
        "stores to its counter",
    );
    rejects(
        "for (var i = 0u; i < 10u; i++) { bump(&i); }",
        "pointer to its counter",
    );
    rejects(
        "for (var i = 0u; i < buf[0]; i++) { buf[0] = buf[0] + 1u; }",
        "bound of `i` may change",
    );
    rejects(
        "var n = 10u; for (var i = 0u; i < n; i++) { n += 1u; }",
        "bound of `i` may change",
    );
    rejects("for (var s = 128u; s >= 0u; s >>= 1u) { acc += s; }", "");
    rejects(
        "for (var k = 0u; k < 1024u; k <<= 1u) { acc += k; }",
        "may be 0 when",
    );
    rejects(
        "var k = 1u; k = 0u; for (; k < 1024u; k <<= 1u) { acc += k; }",
        "may be 0 when",
    );
    rejects(
        "for (var k = 1u; k <= 0x80000000u; k <<= 1u) { acc += k; }",
        "may overflow",
    );
    rejects(
        "for (var i = 0u; i <= 0xffffffffu; i++) { acc += i; }",
        "may wrap around",
    );
    rejects(
        "for (var i = lid; i < ro[0]; i += 64u) { acc += i; }",
        "may wrap around",
    );
    rejects(
        "for (var i = 0u; i < 10u; i = i * 2u) { acc += i; }",
        "do not match",
    );
    rejects(
        "for (var i = 10u; i > 0u; i -= 1u) { acc += i; }",
        "do not match",
    );
    rejects(
        "var i = 0u; let j = i; for (; j < 10u; i++) { acc += i; }",
        "before the loop",
    );
    // The update must read the counter where it runs, not a copy from before the loop.
    rejects(
        "var i = 0u; let j = i + 1u; for (; i < 10u; i = j) { acc += i; }",
        "not updated",
    );
    // The line of the loop is reported.
    let e = rejects("for (var i = 0u; i < 10u; i += p.step) { acc += i; }", "");
    let src = kernel("for (var i = 0u; i < 10u; i += p.step) { acc += i; }");
    assert_eq!(
        e.line(&src),
        Some(src.lines().position(|l| l.contains("p.step")).unwrap() as u32 + 1)
    );
}

/// The probe's bandwidth kernels are compiled from these sources as they are.
#[test]
fn probe_kernels_are_proved() {
    for (name, src) in [
        ("bench_chain", fuselm::shaders::BENCH_CHAIN),
        ("bench_fill", fuselm::shaders::BENCH_FILL),
        ("bench_read", fuselm::shaders::BENCH_READ),
    ] {
        let proof = prove_wgsl(src, &LIMITS)
            .unwrap_or_else(|e| panic!("{name}: {}", e.describe(Some(src))));
        assert!(
            proof.assumptions.is_empty(),
            "{name}: {:?}",
            proof.assumptions
        );
    }
}

/// The uniform fields that the kernels' loop proofs may assume below `PARAM_LIMIT` (2^31), and
/// why the host keeps them there (`check_fit` refuses shapes at or above it: see
/// `fuselm::gpu::LOOP_PARAM_LIMIT`).
const HOST_LIMITED: &[(&str, &str)] = &[
    (
        "p.head_dim",
        "a shape: n_head * head_dim < 2^31 (check_fit)",
    ),
    ("p.n_ctx", "the context length < 2^31 (check_fit)"),
    (
        "p.k",
        "a matrix's input width: n_embd, n_ff or n_head * head_dim < 2^31",
    ),
    ("p.n", "a row width: n_embd or head_dim < 2^31"),
    ("p.n_vocab", "the vocabulary < 2^31 (check_fit)"),
    ("p.end", "a position: at most n_ctx"),
    ("p.n_prompt", "a position: at most n_ctx"),
    (
        "p.steps",
        "read only through min(p.end, ...): never bounds a loop alone",
    ),
    (
        "p.n_lists",
        "the vocabulary's 1024-logit slices: below the vocabulary",
    ),
    ("p.n_best", "head_logits workgroups: below the vocabulary"),
];

#[test]
fn param_limit_is_the_hosts() {
    assert_eq!(PARAM_LIMIT, fuselm::gpu::LOOP_PARAM_LIMIT);
    assert_eq!(PARAM_LIMIT, 1 << 31);
}

/// Models that together use every weight format, architecture and KV format.
fn specs() -> Vec<SyntheticSpec> {
    use GgmlType::*;
    let small = SyntheticSpec {
        n_layers: 2,
        n_embd: 256,
        n_ff: 512,
        n_head: 4,
        n_head_kv: 2,
        ..SyntheticSpec::default()
    };
    vec![
        SyntheticSpec {
            n_layers: 4,
            matrix_types: vec![Q4_1, Q8_0, Q4_0, F16],
            embedding_type: Q8_0,
            tied: true,
            ..small.clone()
        },
        SyntheticSpec {
            n_layers: 4,
            n_head: 8,
            n_head_kv: 8,
            matrix_types: vec![F32, Q4_K, Q6_K, BF16],
            embedding_type: Q6_K,
            tied: false,
            ..small.clone()
        },
        SyntheticSpec {
            arch: "qwen2",
            n_layers: 4,
            matrix_types: vec![Q5_0, Q5_1, Q5_K, Q2_K],
            embedding_type: Q4_1,
            tied: false,
            ..small.clone()
        },
        SyntheticSpec {
            arch: "qwen3",
            matrix_types: vec![Q3_K, Q4_0],
            embedding_type: F16,
            ..small.clone()
        },
        SyntheticSpec {
            arch: "gemma3",
            matrix_types: vec![Q8_0],
            ..small
        },
    ]
}

/// Every kernel a model compiles (each strategy prepared; f16 and f32 KV caches) is proved,
/// so none runs with forced loop bounding; and the uniform fields the proofs assume below
/// `PARAM_LIMIT` are the ones the host derives from limited shapes.
#[test]
fn every_model_kernel_is_proved() {
    let mut assumed = std::collections::BTreeSet::new();
    pollster::block_on(async {
        for (i, spec) in specs().into_iter().enumerate() {
            let bytes = synthetic_llama(&spec);
            let ctx = GpuContext::new().await.expect("gpu");
            let options = LoadOptions {
                n_ctx: Some(32),
                max_batch: Some(4),
                kv_f16: Some(i % 2 == 0),
                strategy: None,
            };
            let mut model = GpuModel::load(ctx, &bytes, &options).await.expect("load");
            for &strategy in Strategy::ALL {
                if model.check_strategy(strategy).is_ok() {
                    model.prepare_strategy(strategy).await.expect("prepare");
                }
            }
            // And the kernels compiled on first use: the constraint mask, log-probabilities.
            fuselm::kernels::constraint::ConstraintMask::new(model.context())
                .await
                .expect("constraint_mask");
            fuselm::kernels::logprobs::LogprobKernels::new(model.context())
                .await
                .expect("logprob kernels");
            let unproven = model.context().unproven_loops();
            assert!(unproven.is_empty(), "{}: {unproven:#?}", spec.arch);
            assert!(
                model.context().loop_assumptions().len() > 3,
                "the kernels were compiled through GpuContext::shader"
            );
            for a in model.context().loop_assumptions() {
                let field = a.split(": ").nth(1).unwrap_or_default().to_string();
                assert!(
                    HOST_LIMITED.iter().any(|(f, _)| *f == field),
                    "{a}: a loop bound read from a uniform buffer that the host does not limit \
                     below PARAM_LIMIT (add the limit, then the field to HOST_LIMITED)"
                );
                assumed.insert(field);
            }
        }
    });
}

/// The cooperative-matrix prefill tile (`matmul_coop.wgsl`), compiled only where the adapter has
/// cooperative matrices (not lavapipe): its loops are proved for every format it runs, so a GPU
/// compiles it without forced loop bounding.
#[test]
fn the_cooperative_matrix_tile_is_proved() {
    use fuselm::kernels::{MatMul, WeightFormat};
    for format in WeightFormat::ALL {
        if matches!(format, WeightFormat::F32 | WeightFormat::BF16) {
            continue;
        }
        let source = MatMul::coop_source(format);
        if let Err(e) = prove_wgsl(&source, &LIMITS) {
            panic!("matmul_coop {format:?}: {}", e.describe(Some(&source)));
        }
    }
}
