//! GPU memory (src/model/memory.rs): the estimate made from a GGUF header before any weight
//! arrives equals what the loaded model holds (weights, KV cache and activations exactly; its
//! total at least the loaded model's `memory().total`, which is the bytes of every buffer the
//! model's context holds, and within `OTHER_ALLOWANCE` of it) for every architecture and KV
//! size; several models share one device within a budget, a load that would pass it is refused
//! from its header with what is needed and available, and disposing a model frees its memory on
//! the device (the Vulkan allocator's own count, flat across load/dispose cycles). The real
//! SmolLM2 + Gemma 3 270M pair on one device is tests/gemma3_reference.rs; the TypeScript API
//! (`memoryBudget`, `estimateMemory`) is tests/sdk/.
#![cfg(not(target_arch = "wasm32"))]

use fuselm::error::FuselmError;
use fuselm::gguf::Gguf;
use fuselm::gpu::{ContextOptions, GpuContext};
use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use fuselm::model::{
    estimate_memory, GenerationRequest, GpuModel, LoadOptions, MemoryBudget, ModelLoader, Strategy,
    OTHER_ALLOWANCE,
};
use fuselm::sampling::SamplingOptions;

mod common;
use common::architectures::models;

fn options(n_ctx: u32, max_batch: u32) -> LoadOptions {
    LoadOptions {
        n_ctx: Some(n_ctx),
        max_batch: Some(max_batch),
        kv_f16: Some(false),
        strategy: None,
    }
}

fn sibling(ctx: &GpuContext) -> GpuContext {
    ctx.sibling(ContextOptions::default()).unwrap()
}

async fn greedy(gpu: &mut GpuModel, strategy: Strategy, n: u32) -> Vec<u32> {
    let prompt: Vec<u32> = b"memory: ".iter().map(|&b| u32::from(b)).collect();
    let request = GenerationRequest {
        prompt: &prompt,
        max_tokens: n,
        strategy,
        sampler: SamplingOptions::default().resolve(&[]).unwrap(),
        chunk_tokens: 4,
        reuse_prefix: false,
        constraint: None,
        logprobs: None,
    };
    gpu.generate(&request, &mut |_| true).await.unwrap().tokens
}

/// Bytes the device's allocator holds (the Vulkan backend's gpu-allocator), after every
/// destroyed buffer has been reclaimed.
fn device_bytes(ctx: &GpuContext) -> u64 {
    ctx.device
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
    ctx.device
        .generate_allocator_report()
        .expect("the Vulkan backend reports its allocations")
        .total_allocated_bytes
}

#[test]
fn the_estimate_from_the_header_is_what_the_loaded_model_holds() {
    pollster::block_on(async {
        let ctx = GpuContext::new().await.unwrap();
        for (arch, spec) in models() {
            let file = synthetic_llama(&spec);
            let gguf = Gguf::parse(&file).unwrap();
            for (n_ctx, max_batch, kv_f16) in [(64, 16, false), (200, 48, false), (96, 8, true)] {
                let mut load = options(n_ctx, max_batch);
                if kv_f16 {
                    if !ctx.device.features().contains(wgpu::Features::SHADER_F16) {
                        continue;
                    }
                    load.kv_f16 = Some(true);
                }
                let estimate = estimate_memory(&ctx, &gguf, &load).unwrap();
                let model = GpuModel::load(sibling(&ctx), &file, &load).await.unwrap();
                let held = model.memory();
                let what = format!("{arch} nCtx {n_ctx} maxBatch {max_batch} f16 {kv_f16}");
                assert_eq!(estimate.weights, held.weights, "{what}: weights");
                assert_eq!(estimate.kv_cache, held.kv_cache, "{what}: KV cache");
                assert_eq!(
                    estimate.activations, held.activations,
                    "{what}: activations"
                );
                assert_eq!(held.megakernel, 0, "{what}");
                assert_eq!(
                    held.total,
                    held.weights + held.kv_cache + held.activations + held.other,
                    "{what}: the parts add up"
                );
                // The estimate covers the model once it has generated too (the fused kernels'
                // norms, staging), the megakernel's arena aside, and allows little more.
                let mut model = model;
                for strategy in [Strategy::Unfused, Strategy::Fused] {
                    greedy(&mut model, strategy, 2).await;
                }
                let used = model.memory();
                assert!(
                    estimate.total >= used.total
                        && estimate.total - held.total <= estimate.other + OTHER_ALLOWANCE,
                    "{what}: estimated {estimate:?}, held {held:?}, after generating {used:?}"
                );
                println!(
                    "{what}: total {} estimated, {} held, {} after generating (other {}, {}, {})",
                    estimate.total, held.total, used.total, estimate.other, held.other, used.other
                );
            }
        }
    });
}

#[test]
fn models_share_a_device_within_a_budget_and_free_it_when_dropped() {
    pollster::block_on(async {
        let ctx = GpuContext::new().await.unwrap();
        let (_, small) = models().remove(1);
        let a_file = synthetic_llama(&SyntheticSpec::default());
        let b_file = synthetic_llama(&small);
        let (a_load, b_load) = (options(128, 16), options(64, 16));
        let a_need = estimate_memory(&ctx, &Gguf::parse(&a_file).unwrap(), &a_load).unwrap();
        let b_need = estimate_memory(&ctx, &Gguf::parse(&b_file).unwrap(), &b_load).unwrap();
        let load = |file: &[u8], options: &LoadOptions, budget: Option<MemoryBudget>| {
            let mut loader =
                ModelLoader::new(sibling(&ctx), options.clone()).with_memory_budget(budget);
            let pushed = loader.push(file);
            async move {
                pushed?;
                loader.finish().await
            }
        };

        // The first model's load and generation, alone: the ids the others are compared with.
        let baseline = device_bytes(&ctx);
        let budget = a_need.total + b_need.total;
        let mut a = load(&a_file, &a_load, Some(MemoryBudget { budget, in_use: 0 }))
            .await
            .unwrap();
        let alone = greedy(a.gpu(), Strategy::Unfused, 8).await;
        let held = a.gpu().memory().total;
        let mut b = load(
            &b_file,
            &b_load,
            Some(MemoryBudget {
                budget,
                in_use: held,
            }),
        )
        .await
        .unwrap();
        let in_use = held + b.gpu().memory().total;
        assert!(in_use <= budget);

        // A third is refused from its header, before any weight is uploaded, saying both sides:
        // one byte short of its estimate is too little, the estimate itself is enough.
        let before = device_bytes(&ctx);
        let short = MemoryBudget {
            budget: in_use + b_need.total - 1,
            in_use,
        };
        let err = match load(&b_file, &b_load, Some(short)).await {
            Err(e) => e,
            Ok(_) => panic!("a load one byte over the budget"),
        };
        let FuselmError::MemoryBudget {
            needed, available, ..
        } = &err
        else {
            panic!("{err}");
        };
        assert_eq!(*needed, b_need.total, "{err}");
        assert_eq!(*available, b_need.total - 1, "{err}");
        assert_eq!(err.kind().as_str(), "limit-exceeded");
        let message = err.to_string();
        for part in [
            "memoryBudget",
            "weights",
            "KV cache",
            "nCtx 64",
            "held by the models",
        ] {
            assert!(message.contains(part), "{message:?} names {part}");
        }
        assert_eq!(
            device_bytes(&ctx),
            before,
            "the refused load left nothing on the device"
        );
        let exact = MemoryBudget {
            budget: in_use + b_need.total,
            in_use,
        };
        let third = load(&b_file, &b_load, Some(exact)).await.unwrap();
        drop(third);

        // Both models generate on the shared device, the first as it did alone.
        assert_eq!(greedy(a.gpu(), Strategy::Unfused, 8).await, alone);
        let b_ids = greedy(b.gpu(), Strategy::Unfused, 8).await;

        // Dropping one frees its memory at once; the budget then takes another.
        drop(a);
        let freed = device_bytes(&ctx);
        assert!(freed < before, "dropping a model frees device memory");
        let mut c = load(&b_file, &b_load, None).await.unwrap();
        assert_eq!(
            greedy(c.gpu(), Strategy::Unfused, 8).await,
            b_ids,
            "a copy of b generates as b"
        );
        assert_eq!(greedy(b.gpu(), Strategy::Unfused, 8).await, b_ids);
        drop((b, c));

        // Load/dispose cycles: the device's memory comes back to where it was each time.
        let after_first = device_bytes(&ctx);
        for cycle in 0..6 {
            let mut m = load(&a_file, &a_load, None).await.unwrap();
            assert_eq!(
                greedy(m.gpu(), Strategy::Unfused, 2).await,
                alone[..2],
                "cycle {cycle}"
            );
            drop(m);
            assert_eq!(
                device_bytes(&ctx),
                after_first,
                "cycle {cycle}: memory is flat"
            );
        }
        println!(
            "device memory: {baseline} before, {before} with two models, {after_first} after \
             disposing them and 6 load/dispose cycles"
        );
    });
}
