//! Saved sessions (src/model/session.rs) on the GPU: a session saved after a turn and restored
//! into another load of the same model continues exactly as the original does (greedy ids), on
//! fused and unfused, prefilling only the new turn, also into a load with a larger `nCtx`.
//! A megakernel's own cache saves too. Damaged, foreign and oversized sessions are typed
//! "session" errors that leave the model usable. The format's own checks are unit tests in
//! src/model/session.rs; the TypeScript API, the worker and the stores are tests/sdk/.
#![cfg(not(target_arch = "wasm32"))]

use fuselm::gpu::{ContextOptions, GpuContext};
use fuselm::model::synthetic::{synthetic_llama, SyntheticSpec};
use fuselm::model::{GenerationRequest, GpuModel, LoadOptions, Strategy};
use fuselm::sampling::SamplingOptions;

fn options(n_ctx: u32) -> LoadOptions {
    LoadOptions {
        n_ctx: Some(n_ctx),
        max_batch: Some(16),
        kv_f16: Some(false),
        strategy: None,
    }
}

/// Another context on `ctx`'s device (pipelines compiled once for every load of the test).
fn sibling(ctx: &GpuContext) -> GpuContext {
    ctx.sibling(ContextOptions::default()).unwrap()
}

fn ids(text: &[u8]) -> Vec<u32> {
    text.iter().map(|&b| u32::from(b)).collect()
}

/// Greedy ids of `strategy` after `prompt`, reusing the cached prefix; and how many prompt
/// tokens were reused.
async fn turn(gpu: &mut GpuModel, strategy: Strategy, prompt: &[u32], n: u32) -> (Vec<u32>, u32) {
    let request = GenerationRequest {
        prompt,
        max_tokens: n,
        strategy,
        sampler: SamplingOptions::default().resolve(&[]).unwrap(),
        chunk_tokens: 4,
        reuse_prefix: true,
        constraint: None,
        logprobs: None,
    };
    let out = gpu.generate(&request, &mut |_| true).await.unwrap();
    (out.tokens, out.reused_prompt_tokens)
}

#[test]
fn a_restored_session_continues_exactly() {
    pollster::block_on(async {
        let file = synthetic_llama(&SyntheticSpec::default());
        let ctx = GpuContext::new().await.unwrap();
        for strategy in [Strategy::Unfused, Strategy::Fused] {
            let mut original = GpuModel::load(sibling(&ctx), &file, &options(64))
                .await
                .unwrap();
            let first = ids(b"a saved session: ");
            let (reply, _) = turn(&mut original, strategy, &first, 6).await;
            let (saved, info) = original.save_session().await.unwrap();
            // The prompt and every generated token but the last (whose row the next step writes).
            assert_eq!(info.tokens as usize, first.len() + reply.len() - 1);
            assert_eq!(info.bytes, saved.len() as u64);
            // SyntheticSpec::default(): 3 layers × 2 KV heads × 32 dims × f32, K and V.
            assert_eq!(
                saved.len(),
                40 + info.tokens as usize * (4 + 2 * 3 * 2 * 32 * 4)
            );

            let second = [first.clone(), reply.clone(), ids(b" and on: ")].concat();
            let (want, reused) = turn(&mut original, strategy, &second, 8).await;
            assert_eq!(
                reused, info.tokens,
                "{strategy:?}: the original reuses its cache"
            );

            // Another load of the same file, with a larger context, restores and goes on alike.
            let mut restored = GpuModel::load(sibling(&ctx), &file, &options(96))
                .await
                .unwrap();
            assert_eq!(restored.load_session(&saved).await.unwrap(), info);
            let (got, reused) = turn(&mut restored, strategy, &second, 8).await;
            assert_eq!(
                reused, info.tokens,
                "{strategy:?}: only the new turn is prefilled"
            );
            assert_eq!(
                got, want,
                "{strategy:?}: the restored session continues exactly"
            );

            // Without the session the same prompt is prefilled whole (nothing reused): the
            // restore, not a stale cache, made the reuse.
            let mut fresh = GpuModel::load(sibling(&ctx), &file, &options(64))
                .await
                .unwrap();
            let (_, reused) = turn(&mut fresh, strategy, &second, 2).await;
            assert_eq!(reused, 0);
        }
    });
}

#[test]
fn bad_sessions_are_typed_errors_and_the_model_stays_usable() {
    pollster::block_on(async {
        let file = synthetic_llama(&SyntheticSpec::default());
        let ctx = GpuContext::new().await.unwrap();
        let mut model = GpuModel::load(sibling(&ctx), &file, &options(64))
            .await
            .unwrap();
        let prompt = ids(b"twenty-one tokens, or so");
        let (reply, _) = turn(&mut model, Strategy::Unfused, &prompt, 4).await;
        let (saved, info) = model.save_session().await.unwrap();
        let session_error = |e: fuselm::FuselmError| {
            assert_eq!(e.kind().as_str(), "session", "{e}");
            e.to_string()
        };

        let mut damaged = saved.clone();
        damaged[100] ^= 0x40;
        let e = session_error(model.load_session(&damaged).await.unwrap_err());
        assert!(e.contains("damaged"), "{e}");
        let e = session_error(model.load_session(b"not a session").await.unwrap_err());
        assert!(e.contains("not a fuselm session"), "{e}");

        // Another model of the same shape (other weights) refuses it.
        let other = synthetic_llama(&SyntheticSpec {
            seed: 99,
            ..SyntheticSpec::default()
        });
        let mut foreign = GpuModel::load(sibling(&ctx), &other, &options(64))
            .await
            .unwrap();
        let e = session_error(foreign.load_session(&saved).await.unwrap_err());
        assert!(e.contains("another model"), "{e}");

        // A load whose context cannot hold the session's tokens.
        let mut small = GpuModel::load(sibling(&ctx), &file, &options(16))
            .await
            .unwrap();
        let e = session_error(small.load_session(&saved).await.unwrap_err());
        assert!(e.contains("nCtx (16)"), "{e}");

        // Each refusal left the model as it was: its own cache is still reused.
        let next = [prompt.clone(), reply.clone()].concat();
        let (_, reused) = turn(&mut model, Strategy::Unfused, &next, 2).await;
        assert_eq!(reused, info.tokens);

        // A megakernel generation fills a KV cache of its own (f32, like this model's): its
        // session restores into the shared cache, and fused continues it as the megakernel does.
        let (mega, _) = turn(&mut model, Strategy::Megakernel, &prompt, 3).await;
        let (saved, info) = model.save_session().await.unwrap();
        assert_eq!(info.tokens as usize, prompt.len() + 2);
        let next = [prompt.clone(), mega.clone(), ids(b"!")].concat();
        let (want, _) = turn(&mut model, Strategy::Megakernel, &next, 4).await;
        assert_eq!(model.load_session(&saved).await.unwrap(), info);
        let (got, reused) = turn(&mut model, Strategy::Fused, &next, 4).await;
        assert_eq!(reused, info.tokens);
        assert_eq!(got, want, "fused after a megakernel session");

        // An empty session (a fresh load) restores to an empty cache.
        let fresh = GpuModel::load(sibling(&ctx), &file, &options(64))
            .await
            .unwrap();
        let (empty, info) = fresh.save_session().await.unwrap();
        assert_eq!((info.tokens, info.bytes), (0, 40));
        assert_eq!(model.load_session(&empty).await.unwrap().tokens, 0);
        let (_, reused) = turn(&mut model, Strategy::Fused, &prompt, 2).await;
        assert_eq!(reused, 0);
    });
}
