//! The GPU's constraint mask (constraint_mask.wgsl) equals the CPU automaton's, bit for bit,
//! for reachable states spread over several constraints, over the synthetic byte vocabulary and
//! SmolLM2's 49,152 tokens: natively on lavapipe and in Chromium (Tint, SwiftShader), where the
//! compile runs in wasm too. The megakernels' mask (megakernel.wgsl) is checked end to end
//! against fused and unfused in tests/constraint.rs and the SDK test.

mod common;

use common::constraints::{person, schema};
use fuselm::constraint::{ResponseFormat, VocabBytes};
use fuselm::gguf::Gguf;
use fuselm::gpu::{read_buffer, GpuContext};
use fuselm::kernels::constraint::{ConstraintMask, ConstraintTable};
use fuselm::kernels::DecodeState;
use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use std::sync::Arc;

gpu_test!(gpu_mask_equals_the_cpu_mask, masks_bit_for_bit);

async fn masks_bit_for_bit() {
    {
        let ctx = GpuContext::new().await.expect("gpu");
        let mask = ConstraintMask::new(&ctx).await.expect("kernel");
        let synthetic = synthetic_llama(&SyntheticSpec::default());
        let smol = common::default_model_bytes().await;
        for (name, file) in [("synthetic", &synthetic), ("SmolLM2", &smol)] {
            let gguf = Gguf::parse(file).expect("gguf");
            let tokenizer = fuselm::model::tokenizer_from_gguf(&gguf).expect("tokenizer");
            let eog = tokenizer.eog_ids().to_vec();
            let vocab = Arc::new(VocabBytes::from_tokenizer(&tokenizer, &eog));
            for format in [
                schema(person()),
                ResponseFormat::JsonObject { max_depth: Some(2) },
                ResponseFormat::Regex {
                    pattern: "(?:[0-9]{3}-)?[a-zé]{1,5}( [A-Z]+)*".into(),
                },
            ] {
                let t0 = fuselm::clock::now_seconds();
                let c = format
                    .compile(&vocab)
                    .expect("compiles")
                    .expect("a constraint");
                let a = &c.automaton;
                eprintln!(
                    "{name} ({} ids): {} DFA states, {} reached by tokens, {} masks, {} trie steps, compiled in {:.0} ms",
                    vocab.n_vocab,
                    a.dfa.n_states(),
                    a.n_token_states(),
                    a.n_masks(),
                    a.visits,
                    (fuselm::clock::now_seconds() - t0) * 1e3
                );
                let table = ConstraintTable::upload(&ctx, a).expect("upload");
                let n = vocab.n_vocab as usize;
                let counts = ctx.device.create_buffer(&wgpu::BufferDescriptor {
                    label: None,
                    size: (n * 4) as u64,
                    usage: wgpu::BufferUsages::STORAGE
                        | wgpu::BufferUsages::COPY_DST
                        | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                });
                let state = DecodeState::new(0, 1).create_buffer(&ctx);
                let call = mask.bind(&ctx, &state, &table, &counts).expect("bind");
                // Up to 24 reached states, spread over the table; the counts keep penalty
                // counts in their low bits, which the mask must leave alone.
                let reached: Vec<u32> = (0..a.dfa.n_states())
                    .filter(|&s| a.mask_of_state[s as usize] != u32::MAX)
                    .collect();
                let step = reached.len().div_ceil(24).max(1);
                let low: Vec<u32> = (0..n as u32).map(|i| i % 7).collect();
                for &s in reached.iter().step_by(step) {
                    let st = DecodeState {
                        aux: s,
                        ..DecodeState::new(0, 1)
                    };
                    ctx.queue.write_buffer(&state, 0, bytemuck::bytes_of(&st));
                    let seeded: Vec<u32> = low
                        .iter()
                        .enumerate()
                        .map(|(i, &c)| c | ((i as u32 % 2) << 31))
                        .collect();
                    ctx.queue
                        .write_buffer(&counts, 0, bytemuck::cast_slice(&seeded));
                    let mut enc = ctx.device.create_command_encoder(&Default::default());
                    {
                        let mut pass = enc.begin_compute_pass(&Default::default());
                        call.record(&mut pass);
                    }
                    ctx.queue.submit([enc.finish()]);
                    let got: Vec<u32> = bytemuck::pod_collect_to_vec(
                        &read_buffer(&ctx.device, &ctx.queue, &counts, 0, (n * 4) as u64)
                            .await
                            .expect("read"),
                    );
                    for id in 0..n as u32 {
                        let want = low[id as usize] | if a.allowed(s, id) { 0 } else { 1 << 31 };
                        assert_eq!(
                            got[id as usize], want,
                            "{name} {format:?}: state {s}, id {id}"
                        );
                    }
                }
            }
        }
    }
}
