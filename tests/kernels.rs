//! Embed, RmsNorm, SwiGlu, Add, Argmax and Advance against `fuselm::reference`, plus the
//! typed errors of bad bindings. Matrix products: kernel_matmul.rs; rope, KV cache and
//! attention: kernel_attention.rs. Every output buffer starts as NaN poison.

mod common;
mod kernel_support;

use fuselm::gpu::{StagedRead, StagingPool};
use fuselm::kernels::{
    Add, Advance, Argmax, DecodeState, Embed, GpuWeight, MatVec, RmsNorm, RmsRows, SwiGlu,
    WeightFormat,
};
use fuselm::{reference, FuselmError};
use kernel_support::*;

/// Embedding rows are copied out exactly (the decoders reproduce ggml's dequantization).
async fn embed_all_formats() {
    let ctx = context().await;
    // (format, n_embd, n_vocab, table chunk limit)
    let cases = [
        (WeightFormat::F32, 100, 33, None),
        (WeightFormat::F16, 33, 100, None),
        (WeightFormat::F16, 33, 100, Some(700)),
        (WeightFormat::Q8_0, 576, 1000, None),
        (WeightFormat::Q8_0, 576, 1000, Some(40_000)),
        (WeightFormat::Q4_0, 64, 33, None),
        (WeightFormat::Q4_1, 576, 300, Some(20_000)),
        (WeightFormat::Q5_0, 96, 50, None),
        (WeightFormat::Q5_1, 576, 300, Some(20_000)),
        (WeightFormat::BF16, 33, 100, None),
        (WeightFormat::Q2_K, 256, 90, None),
        (WeightFormat::Q3_K, 512, 70, Some(9_000)),
        (WeightFormat::Q4_K, 256, 100, None),
        (WeightFormat::Q5_K, 512, 70, Some(20_000)),
        (WeightFormat::Q6_K, 512, 60, Some(20_000)),
    ];
    for (i, (format, k, n_vocab, chunk)) in cases.into_iter().enumerate() {
        let mut rng = Rng::new(i as u64);
        let (bytes, dense, ty) = weights(&mut rng, format, k, n_vocab);
        let table = match chunk {
            Some(max) => {
                GpuWeight::upload_chunked(&ctx, "embd", ty, k as u64, n_vocab as u64, &bytes, max)
            }
            None => GpuWeight::upload(&ctx, "embd", ty, k as u64, n_vocab as u64, &bytes),
        }
        .expect("upload");
        let kernel = Embed::new(&ctx, format).await.expect("embed pipeline");
        // A step of 5 tokens at positions 4..9, ids spread over every chunk incl. the last row.
        let (pos, n_tokens) = (4u32, 5usize);
        let mut ids: Vec<u32> = (0..16).map(|_| rng.next_u32() % n_vocab as u32).collect();
        ids[pos as usize + 4] = n_vocab as u32 - 1;
        ids[pos as usize] = 0;
        let tokens = buffer_u32(&ctx, &ids);
        let st = state(&ctx, pos, n_tokens as u32);
        let out = poisoned(&ctx, k * 6);
        let call = kernel
            .bind(&ctx, &table, &st, &tokens, &out, 6)
            .expect("bind");
        run(&ctx, |pass| {
            call.record(pass, n_tokens as u32).expect("record")
        });
        let got = read_f32(&ctx, &out, k * 6).await;
        let want: Vec<f32> = ids[pos as usize..pos as usize + n_tokens]
            .iter()
            .flat_map(|&id| dense[id as usize * k..(id as usize + 1) * k].to_vec())
            .collect();
        let case = format!(
            "embed {format:?} k={k} vocab={n_vocab} chunks={}",
            table.chunks().len()
        );
        assert_close(&case, &got[..k * n_tokens], &want, 0.0, 0.0);
        assert!(
            got[k * n_tokens..].iter().all(|v| v.to_bits() == POISON),
            "{case}: row 5 untouched"
        );
    }
}
gpu_test!(embed_all_formats_exact, embed_all_formats);

/// Tolerance 1e-5 relative + 1e-6 absolute (sum of squares in a different order).
async fn rms_norm_rows() {
    let ctx = context().await;
    let kernel = RmsNorm::new(&ctx).await.expect("pipeline");
    for (i, (n, n_tokens)) in [(576, 1), (1536, 3), (33, 4), (100, 2)]
        .into_iter()
        .enumerate()
    {
        let mut rng = Rng::new(40 + i as u64);
        let x = rng.vec(n * n_tokens, 3.0);
        let w = rng.vec(n, 1.0);
        let want = reference::rms_norm(&x, &w, 1e-5);
        let (st, xb, wb) = (
            state(&ctx, 9, n_tokens as u32),
            buffer_f32(&ctx, &x),
            buffer_f32(&ctx, &w),
        );
        for rows in [RmsRows::All, RmsRows::Last] {
            let out = poisoned(&ctx, n * n_tokens);
            let call = kernel
                .bind(
                    &ctx,
                    n as u32,
                    1e-5,
                    rows,
                    &st,
                    &xb,
                    &wb,
                    &out,
                    n_tokens as u32,
                )
                .expect("bind");
            run(&ctx, |pass| {
                call.record(pass, n_tokens as u32).expect("record")
            });
            let got = read_f32(&ctx, &out, n * n_tokens).await;
            let case = format!("rms_norm n={n} tokens={n_tokens} {rows:?}");
            match rows {
                RmsRows::Last => {
                    assert_close(&case, &got[..n], &want[n * (n_tokens - 1)..], 1e-6, 1e-5)
                }
                _ => assert_close(&case, &got, &want, 1e-6, 1e-5),
            };
        }
    }
}
gpu_test!(rms_norm_matches_reference, rms_norm_rows);

/// Per-head norms (qwen3/gemma3 Q/K norms): `heads` rows of `n` per token, one weight for all.
async fn rms_norm_per_head() {
    let ctx = context().await;
    let kernel = RmsNorm::new(&ctx).await.expect("pipeline");
    for (i, (n, heads, n_tokens)) in [(256, 4, 1), (64, 9, 3), (33, 2, 5)]
        .into_iter()
        .enumerate()
    {
        let mut rng = Rng::new(50 + i as u64);
        let len = n * heads * n_tokens;
        let (x, w) = (rng.vec(len, 3.0), rng.vec(n, 1.0));
        let want = reference::rms_norm(&x, &w, 1e-6);
        let st = state(&ctx, 0, n_tokens as u32);
        let (xb, wb, out) = (
            buffer_f32(&ctx, &x),
            buffer_f32(&ctx, &w),
            poisoned(&ctx, len + 5),
        );
        let rows = RmsRows::PerHead(heads as u32);
        let call = kernel
            .bind(
                &ctx,
                n as u32,
                1e-6,
                rows,
                &st,
                &xb,
                &wb,
                &out,
                n_tokens as u32,
            )
            .expect("bind");
        run(&ctx, |pass| {
            call.record(pass, n_tokens as u32).expect("record")
        });
        let got = read_f32(&ctx, &out, len + 5).await;
        let case = format!("rms_norm per head n={n} heads={heads} tokens={n_tokens}");
        assert_close(&case, &got[..len], &want, 1e-6, 1e-5);
        assert!(
            got[len..].iter().all(|v| v.to_bits() == POISON),
            "{case}: wrote past the rows"
        );
    }
}
gpu_test!(rms_norm_per_head_matches_reference, rms_norm_per_head);

/// SwiGLU: 1e-6 absolute + 1e-5 relative (GPU exp); Add: exact.
async fn elementwise() {
    let ctx = context().await;
    let swiglu = SwiGlu::new(&ctx).await.expect("swiglu pipeline");
    let add = Add::new(&ctx).await.expect("add pipeline");
    for (i, (n, n_tokens)) in [(1536, 1), (576, 4), (33, 3)].into_iter().enumerate() {
        let mut rng = Rng::new(60 + i as u64);
        let len = n * n_tokens;
        let (a, b) = (rng.vec(len, 8.0), rng.vec(len, 2.0));
        let st = state(&ctx, 0, n_tokens as u32);
        let (ab, bb, out) = (
            buffer_f32(&ctx, &a),
            buffer_f32(&ctx, &b),
            poisoned(&ctx, len + 7),
        );
        let call = swiglu
            .bind(&ctx, n as u32, &st, &ab, &bb, &out, n_tokens as u32)
            .expect("bind");
        run(&ctx, |pass| {
            call.record(pass, n_tokens as u32).expect("record")
        });
        let got = read_f32(&ctx, &out, len + 7).await;
        assert_close(
            &format!("swiglu n={n} tokens={n_tokens}"),
            &got[..len],
            &reference::swiglu(&a, &b),
            1e-6,
            1e-5,
        );
        assert!(
            got[len..].iter().all(|v| v.to_bits() == POISON),
            "swiglu wrote past n_tokens * n"
        );

        let call = add
            .bind(&ctx, n as u32, &st, &bb, &ab, n_tokens as u32)
            .expect("bind");
        run(&ctx, |pass| {
            call.record(pass, n_tokens as u32).expect("record")
        });
        let got = read_f32(&ctx, &ab, len).await;
        assert_close(
            &format!("add n={n} tokens={n_tokens}"),
            &got,
            &reference::add(&a, &b),
            0.0,
            0.0,
        );
    }
}
gpu_test!(swiglu_and_add_match_reference, elementwise);

/// GeGLU (gemma's GELU gate, including |x| large enough to saturate tanh) within 1e-6 absolute +
/// 1e-5 relative; bias add (one row broadcast to every token) exact.
async fn geglu_and_bias() {
    let ctx = context().await;
    let swiglu = SwiGlu::new(&ctx).await.expect("swiglu pipeline");
    let add = Add::new(&ctx).await.expect("add pipeline");
    for (i, (n, n_tokens)) in [(2048, 1), (640, 3), (33, 2)].into_iter().enumerate() {
        let mut rng = Rng::new(70 + i as u64);
        let len = n * n_tokens;
        let (mut g, u) = (rng.vec(len, 8.0), rng.vec(len, 2.0));
        g[0] = 60.0;
        g[1] = -60.0;
        let st = state(&ctx, 0, n_tokens as u32);
        let (gb, ub, out) = (
            buffer_f32(&ctx, &g),
            buffer_f32(&ctx, &u),
            poisoned(&ctx, len + 3),
        );
        let act = fuselm::gguf::FfnActivation::GeluTanh;
        let nt = n_tokens as u32;
        let call = swiglu
            .bind_activation(&ctx, n as u32, act, &st, &gb, &ub, &out, nt)
            .expect("bind");
        run(&ctx, |pass| call.record(pass, nt).expect("record"));
        let got = read_f32(&ctx, &out, len + 3).await;
        let case = format!("geglu n={n} tokens={n_tokens}");
        assert_close(&case, &got[..len], &reference::geglu(&g, &u), 1e-6, 1e-5);
        assert!(
            got[len..].iter().all(|v| v.to_bits() == POISON),
            "{case}: wrote past"
        );

        let bias = rng.vec(n, 1.0);
        let bb = buffer_f32(&ctx, &bias);
        let call = add
            .bind_bias(&ctx, n as u32, &st, &bb, &ub, nt)
            .expect("bind");
        run(&ctx, |pass| call.record(pass, nt).expect("record"));
        let got = read_f32(&ctx, &ub, len).await;
        let want: Vec<f32> = u.iter().enumerate().map(|(j, v)| v + bias[j % n]).collect();
        assert_close(
            &format!("bias n={n} tokens={n_tokens}"),
            &got,
            &want,
            0.0,
            0.0,
        );
    }
}
gpu_test!(geglu_and_bias_match_reference, geglu_and_bias);

async fn argmax_cases() {
    let ctx = context().await;
    let kernel = Argmax::new(&ctx).await.expect("pipeline");
    let mut rng = Rng::new(80);
    let mut vocab = rng.vec(49152, 10.0);
    vocab[31337] = 50.0;
    let mut ties = rng.vec(1000, 1.0);
    ties[700] = 5.0;
    ties[300] = 5.0;
    ties[900] = 5.0;
    let mut nan = vec![-1.0f32; 33];
    nan[3] = f32::NAN;
    nan[20] = 2.0;
    let cases: [(&str, Vec<f32>); 5] = [
        ("vocab 49152", vocab),
        ("ties go to the lowest id", ties),
        ("NaN never wins", nan),
        ("all equal", vec![0.25; 100]),
        ("all -inf", vec![f32::NEG_INFINITY; 17]),
    ];
    for (case, logits) in cases {
        let want = reference::argmax(&logits).expect("a max") as u32;
        let lb = buffer_f32(&ctx, &logits);
        let tokens = buffer_u32(&ctx, &[POISON; 16]);
        let st = state(&ctx, 6, 3);
        let call = kernel
            .bind(&ctx, logits.len() as u32, &st, &lb, &tokens)
            .expect("bind");
        run(&ctx, |pass| call.record(pass));
        let got = read_u32(&ctx, &tokens, 16).await;
        assert_eq!(got[9], want, "{case}: written at pos + n_tokens = 9");
        assert!(
            got.iter().enumerate().all(|(i, v)| i == 9 || *v == POISON),
            "{case}: only slot 9"
        );
    }
    assert_eq!(reference::argmax(&[1.0, 3.0, 3.0]), Some(1));
}
gpu_test!(argmax_matches_greedy_sampling, argmax_cases);

async fn advance_state() {
    let ctx = context().await;
    let kernel = Advance::new(&ctx).await.expect("pipeline");
    let st = state(&ctx, 3, 5);
    let call = kernel.bind(&ctx, &st).expect("bind");
    run(&ctx, |pass| {
        call.record(pass);
        call.record(pass);
    });
    let got = read_u32(&ctx, &st, 4).await;
    let want = DecodeState::new(9, 1);
    assert_eq!(got[..2], [want.pos, want.n_tokens]);
}
gpu_test!(advance_moves_to_next_decode_step, advance_state);

/// Bad bindings are typed errors, never panics or GPU validation errors.
async fn bind_errors() {
    let ctx = context().await;
    let mut rng = Rng::new(90);
    let (bytes, _, ty) = weights(&mut rng, WeightFormat::Q4_0, 64, 8);
    let w = GpuWeight::upload(&ctx, "w", ty, 64, 8, &bytes).expect("upload");
    let matvec = MatVec::new(&ctx, WeightFormat::Q8_0)
        .await
        .expect("pipeline");
    let (x, y) = (poisoned(&ctx, 64), poisoned(&ctx, 8));
    let err = matvec.bind(&ctx, &w, &x, &y).map(|_| ()).unwrap_err();
    assert!(matches!(err, FuselmError::InvalidArgument(_)), "{err}");
    let matvec = MatVec::new(&ctx, WeightFormat::Q4_0)
        .await
        .expect("pipeline");
    let err = matvec
        .bind(&ctx, &w, &poisoned(&ctx, 63), &y)
        .map(|_| ())
        .unwrap_err();
    assert!(matches!(err, FuselmError::InvalidArgument(_)), "{err}");
    // A weight whose single row exceeds the binding size cannot be split by rows.
    let err = GpuWeight::upload_chunked(&ctx, "w", ty, 64, 8, &bytes, 39)
        .map(|_| ())
        .unwrap_err();
    match err {
        FuselmError::LimitExceeded {
            limit,
            needed,
            available,
        } => {
            assert_eq!(
                (limit, needed, available),
                ("maxStorageBufferBindingSize", 40, 39)
            );
        }
        other => panic!("expected LimitExceeded, got {other}"),
    }
    let err = GpuWeight::upload(&ctx, "w", ty, 64, 9, &bytes)
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(err, FuselmError::InvalidArgument(_)),
        "wrong byte count: {err}"
    );
    let err = GpuWeight::upload(&ctx, "w", ty, 48, 8, &bytes[..8 * 27])
        .map(|_| ())
        .unwrap_err();
    assert!(
        matches!(err, FuselmError::InvalidArgument(_)),
        "k not whole blocks: {err}"
    );
    // A buffer written by a dispatch may not be bound twice (in-place add of a buffer to itself).
    let add = Add::new(&ctx).await.expect("pipeline");
    let st1 = state(&ctx, 0, 1);
    let err = add.bind(&ctx, 8, &st1, &y, &y, 1).map(|_| ()).unwrap_err();
    assert!(
        matches!(err, FuselmError::InvalidArgument(_)),
        "aliasing: {err}"
    );
    let swiglu = SwiGlu::new(&ctx).await.expect("pipeline");
    let st = state(&ctx, 0, 1);
    let call = swiglu.bind(&ctx, 8, &st, &x, &x, &y, 1).expect("bind");
    let mut too_many = Ok(());
    run(&ctx, |pass| too_many = call.record(pass, 2));
    assert!(matches!(too_many, Err(FuselmError::InvalidArgument(_))));
}
gpu_test!(bad_bindings_are_typed_errors, bind_errors);

/// Pooled readbacks return the right bytes, reuse their staging buffer once a read completed,
/// give overlapping reads buffers of their own, and never reuse one dropped unread.
async fn pooled_readbacks() {
    let ctx = context().await;
    let data: Vec<u32> = (0..1000).map(|i| i * 7 + 1).collect();
    let src = buffer_u32(&ctx, &data);
    let pool = StagingPool::default();
    let read = |offset: u64, len: u64| {
        let mut enc = ctx.device.create_command_encoder(&Default::default());
        let r = StagedRead::copy_pooled(&ctx.device, &pool, &mut enc, &src, offset * 4, len * 4);
        r.submitted(ctx.queue.submit([enc.finish()]))
    };
    let words = |bytes: Vec<u8>| -> Vec<u32> { bytemuck::pod_collect_to_vec(&bytes) };
    let want = |offset: usize, len: usize| data[offset..offset + len].to_vec();
    // Sequential reads of different sizes share one kept buffer.
    assert_eq!(
        words(read(3, 10).read(&ctx.device).await.unwrap()),
        want(3, 10)
    );
    assert_eq!(pool.kept(), 1);
    assert_eq!(
        words(read(100, 1).read(&ctx.device).await.unwrap()),
        want(100, 1)
    );
    assert_eq!(pool.kept(), 1);
    // Larger than the kept buffer: a new one, both kept afterwards.
    assert_eq!(
        words(read(0, 1000).read(&ctx.device).await.unwrap()),
        want(0, 1000)
    );
    assert_eq!(pool.kept(), 2);
    // Two in flight at once take two buffers; both come back.
    let a = read(10, 20);
    let b = read(500, 64);
    assert_eq!(pool.kept(), 0);
    assert_eq!(words(b.read(&ctx.device).await.unwrap()), want(500, 64));
    assert_eq!(words(a.read(&ctx.device).await.unwrap()), want(10, 20));
    assert_eq!(pool.kept(), 2);
    // Dropped unread: destroyed, not kept; the pool still serves the next read.
    drop(read(7, 5));
    assert_eq!(pool.kept(), 1);
    assert_eq!(
        words(read(7, 5).read(&ctx.device).await.unwrap()),
        want(7, 5)
    );
    assert_eq!(pool.kept(), 1);
}
gpu_test!(pooled_readbacks_reuse_buffers_safely, pooled_readbacks);
