//! Rope, KvStore and Attention against `fuselm::reference`, alone and chained over several
//! steps in one compute pass with the state advanced on the GPU.
//!
//! Tolerances: rope 2e-6 absolute for inputs in [-2, 2] at every position up to 5000 (theta is
//! bit-identical to llama.cpp's f32 computation; only sin/cos differ, by ~1e-7); KvStore exact;
//! attention 2e-6 absolute + 1e-5 relative.

mod common;
mod kernel_support;

use fuselm::gguf::{f16_to_f32, f32_to_f16};
use fuselm::gpu::GpuContext;
use fuselm::kernels::{
    Advance, Attention, AttentionMask, AttentionShape, KvFormat, KvStore, Rope, RopeExtension,
    RopeStyle,
};
use fuselm::reference;
use kernel_support::*;

fn shape(n_head: u32, n_head_kv: u32, head_dim: u32, n_ctx: u32) -> AttentionShape {
    AttentionShape {
        n_head,
        n_head_kv,
        head_dim,
        n_ctx,
    }
}

/// CPU rope of `x` (`[n_tokens, heads, head_dim]`) for tokens at `pos0..`.
#[allow(clippy::too_many_arguments)]
fn rope_ref(
    x: &[f32],
    row: usize,
    hd: usize,
    n_rot: usize,
    pos0: u32,
    base: f32,
    neox: bool,
    scale: reference::RopeScale<'_>,
) -> Vec<f32> {
    let mut x = x.to_vec();
    for (t, xt) in x.chunks_mut(row).enumerate() {
        reference::rope_scaled(xt, hd, n_rot, pos0 + t as u32, base, neox, scale);
    }
    x
}

async fn rope_cases() {
    let ctx = context().await;
    let kernel = Rope::new(&ctx).await.expect("pipeline");
    // (shape, n_rot, base)
    let cases = [
        (shape(9, 3, 64, 1), 64, 100_000.0),
        (shape(4, 2, 32, 1), 16, 10_000.0),
        (shape(2, 1, 128, 1), 128, 500_000.0),
        (shape(3, 3, 34, 1), 34, 10_000.0),
    ];
    let mut seed = 0;
    for (s, n_rot, base) in cases {
        for style in [RopeStyle::Normal, RopeStyle::Neox] {
            for (pos0, n_tokens) in [(0u32, 5usize), (7, 1), (1000, 3), (5000, 1)] {
                seed += 1;
                let mut rng = Rng::new(seed);
                let (qr, kr) = (s.q_row() as usize, s.kv_row() as usize);
                let (q, k) = (rng.vec(qr * n_tokens, 2.0), rng.vec(kr * n_tokens, 2.0));
                let (qb, kb, st) = (
                    buffer_f32(&ctx, &q),
                    buffer_f32(&ctx, &k),
                    state(&ctx, pos0, n_tokens as u32),
                );
                let call = kernel
                    .bind(
                        &ctx,
                        &s,
                        n_rot,
                        base,
                        RopeExtension::NONE,
                        style,
                        &st,
                        &qb,
                        &kb,
                        n_tokens as u32,
                    )
                    .expect("bind");
                run(&ctx, |pass| {
                    call.record(pass, n_tokens as u32).expect("record")
                });
                let neox = style == RopeStyle::Neox;
                let hd = s.head_dim as usize;
                let atol = 2e-6;
                let case =
                    format!("rope {style:?} {s:?} n_rot={n_rot} pos={pos0} tokens={n_tokens}");
                let none = reference::RopeScale::NONE;
                let want_q = rope_ref(&q, qr, hd, n_rot as usize, pos0, base, neox, none);
                let want_k = rope_ref(&k, kr, hd, n_rot as usize, pos0, base, neox, none);
                assert_close(
                    &format!("{case} q"),
                    &read_f32(&ctx, &qb, q.len()).await,
                    &want_q,
                    atol,
                    0.0,
                );
                assert_close(
                    &format!("{case} k"),
                    &read_f32(&ctx, &kb, k.len()).await,
                    &want_k,
                    atol,
                    0.0,
                );
            }
        }
    }
}
gpu_test!(rope_both_styles_match_llama_cpp, rope_cases);

/// RoPE with frequency factors (Llama 3, Phi-3's LongRoPE), linear scaling and an attention
/// factor against the CPU reference.
async fn rope_extension_cases() {
    let ctx = context().await;
    let kernel = Rope::new(&ctx).await.expect("pipeline");
    let (s, n_rot, base) = (shape(4, 2, 32, 1), 32u32, 500_000.0f32);
    let factors: Vec<f32> = (0..n_rot / 2)
        .map(|i| 1.0 + (i % 5) as f32 * 1.75)
        .collect();
    let fb = buffer_f32(&ctx, &factors);
    let mut seed = 100;
    for style in [RopeStyle::Normal, RopeStyle::Neox] {
        for (pos0, n_tokens) in [(3u32, 2usize), (4000, 1)] {
            seed += 1;
            let mut rng = Rng::new(seed);
            let (qr, kr) = (s.q_row() as usize, s.kv_row() as usize);
            let (q, k) = (rng.vec(qr * n_tokens, 2.0), rng.vec(kr * n_tokens, 2.0));
            let (qb, kb, st) = (
                buffer_f32(&ctx, &q),
                buffer_f32(&ctx, &k),
                state(&ctx, pos0, n_tokens as u32),
            );
            let ext = RopeExtension {
                factors: Some(&fb),
                freq_scale: 0.25,
                mscale: 1.19,
            };
            let call = kernel
                .bind(
                    &ctx,
                    &s,
                    n_rot,
                    base,
                    ext,
                    style,
                    &st,
                    &qb,
                    &kb,
                    n_tokens as u32,
                )
                .expect("bind");
            run(&ctx, |pass| {
                call.record(pass, n_tokens as u32).expect("record")
            });
            let scale = reference::RopeScale {
                factors: Some(&factors),
                freq_scale: 0.25,
                mscale: 1.19,
            };
            let neox = style == RopeStyle::Neox;
            let hd = s.head_dim as usize;
            for (name, x, b, row) in [("q", &q, &qb, qr), ("k", &k, &kb, kr)] {
                let want = rope_ref(x, row, hd, n_rot as usize, pos0, base, neox, scale);
                assert_close(
                    &format!("rope extension {style:?} pos={pos0} {name}"),
                    &read_f32(&ctx, b, x.len()).await,
                    &want,
                    3e-6,
                    0.0,
                );
            }
        }
    }
}
gpu_test!(rope_extension_matches_reference, rope_extension_cases);

/// Head-major cache index of (kv head, position, dim).
fn cache_index(s: &AttentionShape, h: usize, pos: usize, d: usize) -> usize {
    (h * s.n_ctx as usize + pos) * s.head_dim as usize + d
}

/// Position-major `[pos, n_head_kv, head_dim]` view of a head-major cache, first `len` positions.
fn by_position(s: &AttentionShape, cache: &[f32], len: usize) -> Vec<f32> {
    let (kv, hd) = (s.n_head_kv as usize, s.head_dim as usize);
    let mut out = Vec::with_capacity(len * kv * hd);
    for p in 0..len {
        for h in 0..kv {
            out.extend((0..hd).map(|d| cache[cache_index(s, h, p, d)]));
        }
    }
    out
}

/// `x` as the cache stores it: unchanged for F32, rounded to f16 for F16.
fn as_stored(kv: KvFormat, x: f32) -> f32 {
    match kv {
        KvFormat::F32 => x,
        KvFormat::F16 => f16_to_f32(f32_to_f16(x)),
    }
}

fn cache_buffer(ctx: &GpuContext, kv: KvFormat, x: &[f32]) -> wgpu::Buffer {
    match kv {
        KvFormat::F32 => buffer_f32(ctx, x),
        KvFormat::F16 => {
            let mut halves: Vec<u16> = x.iter().map(|v| f32_to_f16(*v)).collect();
            halves.resize(halves.len().div_ceil(2) * 2, 0);
            buffer_u32(ctx, bytemuck::cast_slice(&halves))
        }
    }
}

async fn read_cache(ctx: &GpuContext, kv: KvFormat, b: &wgpu::Buffer, len: usize) -> Vec<f32> {
    match kv {
        KvFormat::F32 => read_f32(ctx, b, len).await,
        KvFormat::F16 => {
            let words = read_u32(ctx, b, len.div_ceil(2)).await;
            let halves: &[u16] = bytemuck::cast_slice(&words);
            halves[..len].iter().map(|h| f16_to_f32(*h)).collect()
        }
    }
}

/// Fills the caches with random history, stores this step's K/V at `pos0..`, attends, and
/// checks the caches and the output.
async fn check_step(
    ctx: &GpuContext,
    kv: KvFormat,
    s: AttentionShape,
    pos0: usize,
    n_tokens: usize,
    seed: u64,
) {
    check_masked(
        ctx,
        kv,
        s,
        AttentionMask::standard(s.head_dim),
        pos0,
        n_tokens,
        seed,
    )
    .await;
}

/// One KV store + attention step with `mask` (scale, sliding window) against the reference.
async fn check_masked(
    ctx: &GpuContext,
    kv: KvFormat,
    s: AttentionShape,
    mask: AttentionMask,
    pos0: usize,
    n_tokens: usize,
    seed: u64,
) {
    let mut rng = Rng::new(seed);
    let cache_len = s.cache_len() as usize;
    let mut history = |n| -> Vec<f32> {
        rng.vec(n, 1.0)
            .into_iter()
            .map(|x| as_stored(kv, x))
            .collect()
    };
    let (k_hist, v_hist) = (history(cache_len), history(cache_len));
    let (qr, kr) = (s.q_row() as usize, s.kv_row() as usize);
    let (q, k, v) = (
        rng.vec(qr * n_tokens, 2.0),
        rng.vec(kr * n_tokens, 2.0),
        rng.vec(kr * n_tokens, 1.0),
    );
    let (kc, vc) = (
        cache_buffer(ctx, kv, &k_hist),
        cache_buffer(ctx, kv, &v_hist),
    );
    let (qb, kb, vb) = (
        buffer_f32(ctx, &q),
        buffer_f32(ctx, &k),
        buffer_f32(ctx, &v),
    );
    let st = state(ctx, pos0 as u32, n_tokens as u32);
    let out = poisoned(ctx, qr * n_tokens);
    let store = KvStore::new(ctx, kv).await.expect("kv_store pipeline");
    // The tiled variant only where this batch reaches it, as a model load compiles it.
    let attention = Attention::for_batches(ctx, kv, s.head_dim, n_tokens as u32)
        .await
        .expect("attention pipeline");
    let nt = n_tokens as u32;
    let store = store
        .bind(ctx, &s, &st, &kb, &vb, &kc, &vc, nt)
        .expect("bind kv_store");
    let attend = attention
        .bind_masked(ctx, &s, mask, &st, &qb, &kc, &vc, &out, nt)
        .expect("bind attention");
    run(ctx, |pass| {
        store.record(pass, nt).expect("record");
        attend.record(pass, nt).expect("record");
    });
    // The cache: history everywhere except rows pos0.. (up to n_ctx), which hold k and v.
    let (mut k_want, mut v_want) = (k_hist, v_hist);
    let hd = s.head_dim as usize;
    for t in 0..n_tokens {
        for h in 0..s.n_head_kv as usize {
            for d in 0..hd {
                if pos0 + t < s.n_ctx as usize {
                    k_want[cache_index(&s, h, pos0 + t, d)] = as_stored(kv, k[t * kr + h * hd + d]);
                    v_want[cache_index(&s, h, pos0 + t, d)] = as_stored(kv, v[t * kr + h * hd + d]);
                }
            }
        }
    }
    let case = format!("{kv:?} {s:?} {mask:?} pos={pos0} tokens={n_tokens}");
    // WGSL lets f32 -> f16 conversion round either way: allow one f16 ulp (2^-10 relative).
    let rtol = if kv == KvFormat::F16 { 1e-3 } else { 0.0 };
    let k_got = read_cache(ctx, kv, &kc, cache_len).await;
    let v_got = read_cache(ctx, kv, &vc, cache_len).await;
    assert_close(&format!("kv_store k {case}"), &k_got, &k_want, 0.0, rtol);
    assert_close(&format!("kv_store v {case}"), &v_got, &v_want, 0.0, rtol);
    if pos0 + n_tokens > s.n_ctx as usize {
        return; // overflowing steps only check that the store stayed in bounds
    }
    let len = pos0 + n_tokens;
    // The reference attends over the cache as the GPU stored it.
    let (keys, values) = (by_position(&s, &k_got, len), by_position(&s, &v_got, len));
    let (nh, nkv) = (s.n_head as usize, s.n_head_kv as usize);
    let shape = reference::AttentionShape {
        n_head: nh,
        n_head_kv: nkv,
        head_dim: hd,
        scale: mask.scale,
        window: mask.window.map(|w| w as usize),
    };
    let want = reference::windowed_attention(&q, &keys, &values, pos0, &shape);
    let got = read_f32(ctx, &out, qr * n_tokens).await;
    assert_close(&format!("attention {case}"), &got, &want, 2e-6, 1e-5);
}

async fn attention_steps(ctx: &GpuContext, kv: KvFormat) {
    check_step(ctx, kv, shape(9, 3, 64, 300), 290, 3, 1).await; // SmolLM2 heads, crosses a 256 chunk
    check_step(ctx, kv, shape(4, 4, 33, 40), 0, 7, 2).await; // prefill, odd head_dim, MHA
    check_step(ctx, kv, shape(8, 1, 128, 600), 520, 1, 3).await; // decode, 3 chunks, MQA
    check_step(ctx, kv, shape(2, 2, 256, 20), 5, 2, 4).await; // the largest head_dim
    check_step(ctx, kv, shape(9, 3, 64, 1), 0, 1, 5).await; // first token: one key
                                                            // Sliding windows (gemma3's local layers) and a model-specific scale: a window that starts
                                                            // mid-chunk at a decode step past it, windows shorter than a prefill batch, a window
                                                            // longer than the context (no effect).
    let masked = |scale: f32, window: u32| AttentionMask {
        scale,
        window: Some(window),
    };
    check_masked(ctx, kv, shape(9, 3, 64, 600), masked(0.125, 100), 520, 1, 6).await;
    check_masked(ctx, kv, shape(4, 1, 256, 40), masked(0.0625, 3), 0, 7, 7).await;
    check_masked(ctx, kv, shape(4, 4, 33, 300), masked(0.3, 1000), 250, 5, 8).await;
}

/// Prefill batches (the tiled kernel's shapes, run by both kernels): partial query blocks,
/// continuations across key tiles, each head_dim's tile shape (64: 32 keys a tile, 128: 8, 256:
/// 4, odd 33), a window shorter than a query block.
async fn prefill_steps(ctx: &GpuContext, kv: KvFormat) {
    check_step(ctx, kv, shape(9, 3, 64, 200), 0, 40, 11).await;
    check_step(ctx, kv, shape(9, 3, 64, 300), 100, 37, 12).await;
    check_step(ctx, kv, shape(4, 2, 128, 100), 0, 16, 13).await;
    check_step(ctx, kv, shape(4, 4, 33, 120), 50, 17, 14).await;
    let masked = AttentionMask {
        scale: 0.0625,
        window: Some(10),
    };
    check_masked(ctx, kv, shape(2, 1, 256, 80), masked, 5, 20, 15).await;
}

async fn attention_cases() {
    let ctx = context().await;
    attention_steps(&ctx, KvFormat::F32).await;
    prefill_steps(&ctx, KvFormat::F32).await;
}
gpu_test!(kv_store_and_attention_match_reference, attention_cases);

/// The tiled kernel on the short cases too (single tokens, decode past 256 keys, windows).
async fn attention_tiled_cases() {
    let mut options = fuselm::gpu::ContextOptions::default();
    options.tuning.attention_tiled_from = Some(1);
    let ctx = common::gpu_context(options).await;
    attention_steps(&ctx, KvFormat::F32).await;
}
gpu_test!(tiled_attention_matches_reference, attention_tiled_cases);

/// The f16 cache: stored values are f16-rounded (within one f16 ulp of the CPU's rounding) and
/// attention over them matches the reference run on the same stored values.
async fn attention_f16_cases() {
    let ctx = context().await;
    if !ctx.has(wgpu::Features::SHADER_F16) {
        report("skipped: the adapter has no SHADER_F16, so the f16 KV cache is not used here");
        assert!(
            Attention::new(&ctx, KvFormat::F16, 64).await.is_err(),
            "F16 must be refused"
        );
        return;
    }
    attention_steps(&ctx, KvFormat::F16).await;
}
gpu_test!(f16_kv_cache_matches_reference, attention_f16_cases);

async fn kv_store_in_bounds() {
    let ctx = context().await;
    check_step(&ctx, KvFormat::F32, shape(2, 2, 8, 8), 6, 4, 6).await;
}
gpu_test!(kv_store_drops_rows_past_capacity, kv_store_in_bounds);

/// A prefill of 3 tokens then 3 decode steps, recorded in ONE compute pass: rope, kv_store,
/// attention, advance per step, with positions coming only from the GPU state.
async fn chained_steps() {
    let ctx = context().await;
    let s = shape(6, 2, 16, 32);
    let (base, steps) = (10_000.0, [3usize, 1, 1, 1]);
    let (qr, kr, hd) = (s.q_row() as usize, s.kv_row() as usize, s.head_dim as usize);
    let mut rng = Rng::new(77);
    let (rope, store, attention, advance) = (
        Rope::new(&ctx).await.expect("rope"),
        KvStore::new(&ctx, KvFormat::F32).await.expect("kv_store"),
        Attention::for_batches(&ctx, KvFormat::F32, s.head_dim, 3)
            .await
            .expect("attention"),
        Advance::new(&ctx).await.expect("advance"),
    );
    let st = state(&ctx, 0, 3);
    let (kc, vc) = (
        poisoned(&ctx, s.cache_len() as usize),
        poisoned(&ctx, s.cache_len() as usize),
    );
    let adv = advance.bind(&ctx, &st).expect("bind advance");
    let mut inputs = Vec::new();
    let mut calls = Vec::new();
    for &n in &steps {
        let (q, k, v) = (
            rng.vec(qr * n, 1.0),
            rng.vec(kr * n, 1.0),
            rng.vec(kr * n, 1.0),
        );
        let (qb, kb, vb, out) = (
            buffer_f32(&ctx, &q),
            buffer_f32(&ctx, &k),
            buffer_f32(&ctx, &v),
            poisoned(&ctx, qr * n),
        );
        let nt = n as u32;
        calls.push((
            rope.bind(
                &ctx,
                &s,
                16,
                base,
                RopeExtension::NONE,
                RopeStyle::Normal,
                &st,
                &qb,
                &kb,
                nt,
            )
            .expect("rope"),
            store
                .bind(&ctx, &s, &st, &kb, &vb, &kc, &vc, nt)
                .expect("store"),
            attention
                .bind(&ctx, &s, &st, &qb, &kc, &vc, &out, nt)
                .expect("attention"),
            nt,
        ));
        inputs.push((q, k, v, out));
    }
    run(&ctx, |pass| {
        for (r, kv, a, nt) in &calls {
            r.record(pass, *nt).expect("rope");
            kv.record(pass, *nt).expect("store");
            a.record(pass, *nt).expect("attention");
            adv.record(pass);
        }
    });
    let (mut keys, mut values, mut pos) = (Vec::new(), Vec::new(), 0u32);
    for (i, (q, k, v, out)) in inputs.iter().enumerate() {
        let q = rope_ref(q, qr, hd, 16, pos, base, false, reference::RopeScale::NONE);
        keys.extend(rope_ref(
            k,
            kr,
            hd,
            16,
            pos,
            base,
            false,
            reference::RopeScale::NONE,
        ));
        values.extend_from_slice(v);
        let want = reference::causal_attention(&q, &keys, &values, pos as usize, 6, 2, hd);
        let got = read_f32(&ctx, out, q.len()).await;
        assert_close(
            &format!("chained step {i} at pos {pos}"),
            &got,
            &want,
            1e-5,
            1e-5,
        );
        pos += steps[i] as u32;
    }
    let end = read_u32(&ctx, &st, 2).await;
    assert_eq!(end, [pos, 1], "state after the last advance");
}
gpu_test!(prefill_and_decode_steps_in_one_pass, chained_steps);
