//! Context shift (src/model/context_shift.rs) on the GPU.
//! - The kernel: after `shift_context(keep, drop)` every moved key is the old row rotated from
//!   its old position to its new one (computed here in f64 from the saved rows), values and the
//!   kept rows are unchanged: llama (adjacent pairs), qwen2 (NeoX, Llama 3 frequency factors),
//!   gemma3 (local and global RoPE bases, linear scaling on the global layer), phi3 (LongRoPE
//!   factors and attention factor); f16 caches too
//!   where the adapter has shader-f16.
//! - Generation past nCtx (48 ids, two shifts) equals the plain CPU reference doing the same shifts
//!   (`CpuReferenceModel::shift_context`) under the exact reference's rule (equal ids up to the
//!   reference's first top-2 margin below 0.01), on every strategy that runs the model:
//!   unfused, fused, and the megakernel with its own cache.
//!
//! The TypeScript option and the chat page are tests/sdk and tests/site.
#![cfg(not(target_arch = "wasm32"))]

use fuselm::gguf::{dequantize_tensor, f16_to_f32, Gguf, RopeStyle};
use fuselm::gpu::{ContextOptions, GpuContext};
use fuselm::model::synthetic::synthetic_llama;
use fuselm::model::{
    ContextShift, CpuReferenceModel, GenerationRequest, GpuModel, LoadOptions, Strategy,
};
use fuselm::sampling::SamplingOptions;

mod common;
use common::architectures::models;
use common::shift::clean_prompt;

fn options(n_ctx: u32, kv_f16: bool) -> LoadOptions {
    LoadOptions {
        n_ctx: Some(n_ctx),
        max_batch: Some(16),
        kv_f16: Some(kv_f16),
        strategy: None,
    }
}

fn sibling(ctx: &GpuContext) -> GpuContext {
    ctx.sibling(ContextOptions::default()).unwrap()
}

fn request(prompt: &[u32], max_tokens: u32, strategy: Strategy) -> GenerationRequest<'_> {
    GenerationRequest {
        prompt,
        max_tokens,
        strategy,
        sampler: SamplingOptions::default().resolve(&[]).unwrap(),
        chunk_tokens: 4,
        reuse_prefix: true,
        constraint: None,
        logprobs: None,
    }
}

fn prompt(n: usize, salt: u32) -> Vec<u32> {
    (0..n as u32).map(|i| 32 + (i * 7 + salt) % 90).collect()
}

/// The cache rows of a saved session (format v1, src/model/session.rs) as f32:
/// `[layer][K, V][head][token][dim]`.
fn session_rows(bytes: &[u8], f16: bool) -> (u32, Vec<f32>) {
    let n = u32::from_le_bytes(bytes[32..36].try_into().unwrap());
    let rows = &bytes[36 + 4 * n as usize..bytes.len() - 4];
    let values = if f16 {
        rows.chunks_exact(2)
            .map(|c| f16_to_f32(u16::from_le_bytes([c[0], c[1]])))
            .collect()
    } else {
        rows.chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    };
    (n, values)
}

#[test]
fn the_shift_moves_rows_and_rotates_keys_to_their_new_positions() {
    pollster::block_on(async {
        let ctx = GpuContext::new().await.unwrap();
        let formats: &[bool] = if ctx.has(wgpu::Features::SHADER_F16) {
            &[false, true]
        } else {
            &[false]
        };
        for (name, spec) in models() {
            let file = synthetic_llama(&spec);
            let g = Gguf::parse(&file).unwrap();
            let factors = g
                .tensor("rope_freqs.weight")
                .or_else(|| g.tensor("rope_factors_long.weight"))
                .map(|t| dequantize_tensor(t, g.tensor_data(&file, t).unwrap()).unwrap());
            for &f16 in formats {
                let mut gpu = GpuModel::load(sibling(&ctx), &file, &options(64, f16))
                    .await
                    .unwrap();
                let c = gpu.config().clone();
                let p = prompt(30, 3);
                gpu.generate(&request(&p, 10, Strategy::Unfused), &mut |_| true)
                    .await
                    .unwrap();
                let before_tokens = gpu.cached_tokens().to_vec();
                let (n, before) = session_rows(&gpu.save_session().await.unwrap().0, f16);
                assert_eq!(n, 39);
                let (keep, drop) = (3u32, 11u32);
                // Out of range: refused, nothing moved.
                assert!(gpu.shift_context(30, 10).await.is_err());
                assert_eq!(gpu.cached_tokens(), &before_tokens[..]);
                gpu.shift_context(keep, drop).await.unwrap();
                let want_tokens = [&before_tokens[..3], &before_tokens[14..]].concat();
                assert_eq!(gpu.cached_tokens(), &want_tokens[..]);
                let (m, after) = session_rows(&gpu.save_session().await.unwrap().0, f16);
                assert_eq!(m, n - drop);

                let (heads, hd) = (c.n_head_kv as usize, c.head_dim as usize);
                let n_rot = c.rope_dims as usize;
                let neox = c.rope_style == RopeStyle::NeoX;
                let tol = if f16 { 4e-3 } else { 2e-5 };
                let mut worst = 0f64;
                for l in 0..c.n_layers as usize {
                    let (_, base) = c.layer_attention(l as u32);
                    let scale = f64::from(c.layer_rope_scale(l as u32));
                    for kind in 0..2 {
                        for h in 0..heads {
                            let at = |rows: &[f32], n: u32, t: usize| {
                                let o = (((l * 2 + kind) * heads + h) * n as usize + t) * hd;
                                rows[o..o + hd].to_vec()
                            };
                            for t in 0..m as usize {
                                let src = if t < keep as usize {
                                    t
                                } else {
                                    t + drop as usize
                                };
                                let mut want: Vec<f64> =
                                    at(&before, n, src).iter().map(|&v| f64::from(v)).collect();
                                if kind == 0 && src != t {
                                    for i in 0..n_rot / 2 {
                                        let (i0, i1) = if neox {
                                            (i, i + n_rot / 2)
                                        } else {
                                            (2 * i, 2 * i + 1)
                                        };
                                        let f = factors.as_ref().map_or(1.0, |f| f64::from(f[i]));
                                        let freq = f64::from(base)
                                            .powf(-2.0 * i as f64 / n_rot as f64)
                                            / f
                                            * scale;
                                        let a = (t as f64 - src as f64) * freq;
                                        let (x0, x1) = (want[i0], want[i1]);
                                        want[i0] = x0 * a.cos() - x1 * a.sin();
                                        want[i1] = x0 * a.sin() + x1 * a.cos();
                                    }
                                }
                                for (g, w) in at(&after, m, t).iter().zip(&want) {
                                    let err = (f64::from(*g) - w).abs() / w.abs().max(1.0);
                                    worst = worst.max(err);
                                }
                            }
                        }
                    }
                }
                assert!(
                    worst <= tol,
                    "{name} (f16 {f16}): shifted rows off by {worst:e} (tolerance {tol:e})"
                );
            }
        }
    });
}

#[test]
fn generation_past_n_ctx_follows_the_cpu_reference_on_every_strategy() {
    pollster::block_on(async {
        let ctx = GpuContext::new().await.unwrap();
        let (n_ctx, keep, n) = (40u32, 4u32, 48usize);
        for (name, spec) in models() {
            let file = synthetic_llama(&spec);
            let g = Gguf::parse(&file).unwrap();
            let mut cpu = CpuReferenceModel::from_gguf_ctx(&g, &file, n_ctx).unwrap();
            // Past the second shift (ids 24 and 42) without a near tie.
            let want = clean_prompt(&mut cpu, n, keep, n_ctx, 45);
            let (p, exact, want_dropped) = (want.prompt.clone(), want.exact(), want.dropped);
            let want = want.ids;
            assert!(want_dropped >= n_ctx - keep, "{name}: two shifts or more");
            // A next turn maps onto the shifted cache: only the last id and the turn are run.
            let turn = [40u32, 41, 42];
            let mut logits = cpu.forward(&[&want[n - 1..], &turn[..]].concat()).unwrap();
            let (mut want2, mut exact2) = (Vec::new(), None);
            for i in 0..4 {
                let last = &logits[logits.len() - cpu.config.vocab_size as usize..];
                let mut top: Vec<f32> = last.to_vec();
                top.sort_by(|a, b| b.total_cmp(a));
                if top[0] - top[1] < 0.01 && exact2.is_none() {
                    exact2 = Some(i);
                }
                let next = fuselm::reference::argmax(last).unwrap() as u32;
                want2.push(next);
                logits = cpu.forward(&[next]).unwrap();
            }
            let exact2 = exact2.unwrap_or(4);
            let mut gpu = GpuModel::load(sibling(&ctx), &file, &options(n_ctx, false))
                .await
                .unwrap();
            // Without a shift: today's typed error.
            let e = gpu
                .generate(&request(&p, n as u32, Strategy::Unfused), &mut |_| true)
                .await
                .unwrap_err();
            assert_eq!(e.kind().as_str(), "limit-exceeded", "{e}");
            for strategy in [Strategy::Unfused, Strategy::Fused, Strategy::Megakernel] {
                if gpu.check_strategy(strategy).is_err() {
                    continue;
                }
                let shift = Some(ContextShift { keep });
                // A fresh context: the shifts keep the rows this generation wrote.
                let fresh = GenerationRequest {
                    reuse_prefix: false,
                    ..request(&p, n as u32, strategy)
                };
                let out = gpu
                    .generate_shifting(&fresh, shift, &mut |_| true, &|| true)
                    .await
                    .unwrap();
                assert_eq!(out.tokens.len(), n, "{name} {strategy:?}");
                assert_eq!(out.dropped_tokens, want_dropped, "{name} {strategy:?}");
                assert_eq!(
                    out.tokens[..exact],
                    want[..exact],
                    "{name} {strategy:?}: ids past nCtx differ from the CPU reference's"
                );
                let next = [&p[..], &out.tokens, &turn].concat();
                let second = gpu
                    .generate_shifting(&request(&next, 4, strategy), shift, &mut |_| true, &|| true)
                    .await
                    .unwrap();
                let cached = gpu.cached_tokens().len() as u32;
                assert_eq!(
                    second.reused_prompt_tokens,
                    cached - 3 - turn.len() as u32 - 1,
                    "{name} {strategy:?}: the next turn runs only its own tokens"
                );
                assert_eq!(second.dropped_tokens, want_dropped, "{name} {strategy:?}");
                assert_eq!(
                    second.tokens[..exact2],
                    want2[..exact2],
                    "{name} {strategy:?}"
                );
            }
        }
    });
}
