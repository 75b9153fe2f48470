//! MatVec (decode) and MatMul (prefill) against `reference::matvec` / `matmul`, for every
//! weight format, ragged shapes, 2D grids and weights split into row-chunks.
//!
//! Tolerance: per output, `1e-5 * sum_c |W[r][c] x[c]|` (f32 summation-order error; the GPU
//! decodes quantized blocks to exactly ggml's dequantized values).

mod common;
mod kernel_support;

use fuselm::gpu::GpuContext;
use fuselm::kernels::{GpuWeight, MatMul, MatVec, WeightFormat};
use fuselm::reference;
use kernel_support::*;

const REL: f32 = 1e-5;

/// Shapes (k, n) per format: ragged n everywhere; ragged k only where the format allows it.
fn shapes(format: WeightFormat) -> Vec<(usize, usize)> {
    match format {
        WeightFormat::F32 | WeightFormat::F16 | WeightFormat::BF16 => {
            vec![(100, 33), (33, 100), (576, 576), (8, 7)]
        }
        // 256-value superblocks: k is a multiple of 256.
        WeightFormat::Q2_K
        | WeightFormat::Q3_K
        | WeightFormat::Q4_K
        | WeightFormat::Q5_K
        | WeightFormat::Q6_K => {
            vec![(256, 33), (768, 300), (1536, 100)]
        }
        _ => vec![(64, 33), (576, 1536), (1536, 576), (96, 100)],
    }
}

async fn check_matvec(
    ctx: &GpuContext,
    kernel: &MatVec,
    k: usize,
    n: usize,
    chunk: Option<u64>,
    seed: u64,
) -> f32 {
    let format = kernel.format();
    let mut rng = Rng::new(seed);
    let (bytes, dense, ty) = weights(&mut rng, format, k, n);
    let x = rng.vec(k, 1.0);
    let w = match chunk {
        Some(max) => GpuWeight::upload_chunked(ctx, "w", ty, k as u64, n as u64, &bytes, max),
        None => GpuWeight::upload(ctx, "w", ty, k as u64, n as u64, &bytes),
    }
    .expect("upload");
    if chunk.is_some() {
        assert!(w.chunks().len() > 1, "the weight should be split");
    }
    let xb = buffer_f32(ctx, &x);
    let yb = poisoned(ctx, n);
    let call = kernel.bind(ctx, &w, &xb, &yb).expect("bind");
    run(ctx, |pass| call.record(pass));
    let got = read_f32(ctx, &yb, n).await;
    let want = reference::matvec(&dense, &x, k, n);
    let tol = dot_tolerance(&dense, &x, k, REL);
    let case = format!("matvec {format:?} k={k} n={n} chunks={}", w.chunks().len());
    assert_within(&case, &got, &want, &tol)
}

async fn matvec_all_formats() {
    let ctx = context().await;
    for (i, format) in WeightFormat::ALL.into_iter().enumerate() {
        let kernel = MatVec::new(&ctx, format).await.expect("matvec pipeline");
        for (j, (k, n)) in shapes(format).into_iter().enumerate() {
            check_matvec(&ctx, &kernel, k, n, None, (i * 10 + j) as u64).await;
        }
    }
}
gpu_test!(matvec_all_formats_match_reference, matvec_all_formats);

/// SmolLM2's output head: 49152 rows of 576 Q8_0 values (the tied embedding).
async fn matvec_vocab_head() {
    let ctx = context().await;
    let kernel = MatVec::new(&ctx, WeightFormat::Q8_0)
        .await
        .expect("pipeline");
    check_matvec(&ctx, &kernel, 576, 49152, None, 7).await;
}
gpu_test!(matvec_q8_0_vocab_head, matvec_vocab_head);

/// More rows than maxComputeWorkgroupsPerDimension (65535): the grid folds into 2D. Native only,
/// like `matmul_row_tiles_beyond_one_grid_dimension` below: SwiftShader in the browser took ~170 s
/// for these ~70,000 workgroups, and the fold (`kernels::grid`, `linear_group`) is the same code
/// there, under the same 65,535 limit.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
async fn matvec_2d_grid() {
    let ctx = context().await;
    let max = ctx.device.limits().max_compute_workgroups_per_dimension as usize;
    let kernel = MatVec::new(&ctx, WeightFormat::Q4_0)
        .await
        .expect("pipeline");
    check_matvec(&ctx, &kernel, 32, max + 4465, None, 8).await;
}
native_test!(matvec_rows_beyond_one_grid_dimension, matvec_2d_grid);

/// Weights split into row-chunks (one binding each), including odd-k F16 whose rows are not
/// word-aligned.
async fn matvec_chunked() {
    let ctx = context().await;
    let cases = [
        (WeightFormat::Q4_1, 576, 1000, 20_000),
        (WeightFormat::Q8_0, 64, 77, 1000),
        (WeightFormat::F16, 33, 101, 700),
        (WeightFormat::F32, 100, 33, 4000),
    ];
    for (i, (format, k, n, max)) in cases.into_iter().enumerate() {
        let kernel = MatVec::new(&ctx, format).await.expect("pipeline");
        check_matvec(&ctx, &kernel, k, n, Some(max), 20 + i as u64).await;
    }
}
gpu_test!(matvec_row_chunks, matvec_chunked);

/// Layer weights moved into one stacked buffer (`GpuWeight::stack`, what the fused layer kernels
/// bind for every layer): each layer's weight is then a view at a nonzero offset, and MatVec
/// through it still matches the reference; weights that differ in shape are left alone.
async fn matvec_stacked() {
    let ctx = context().await;
    // Q8_0 rows of 72 bytes (odd row counts, so each layer's slot is padded to the offset
    // alignment); F16 with odd k (rows not word-aligned); Q4_K superblocks.
    let cases = [
        (WeightFormat::Q8_0, 64, 33),
        (WeightFormat::F16, 33, 101),
        (WeightFormat::Q4_K, 256, 45),
    ];
    for (i, (format, k, n)) in cases.into_iter().enumerate() {
        let kernel = MatVec::new(&ctx, format).await.expect("pipeline");
        let mut rng = Rng::new(40 + i as u64);
        let layers: Vec<_> = (0..3).map(|_| weights(&mut rng, format, k, n)).collect();
        let mut ws: Vec<GpuWeight> = layers
            .iter()
            .map(|(bytes, _, ty)| {
                GpuWeight::upload(&ctx, "w", *ty, k as u64, n as u64, bytes).expect("upload")
            })
            .collect();
        let stride = GpuWeight::stack(&ctx, "stack", &mut ws.iter_mut().collect::<Vec<_>>())
            .expect("uniform layers stack");
        assert!(stride as usize >= n, "stride {stride} rows < n = {n}");
        let align = u64::from(ctx.device.limits().min_storage_buffer_offset_alignment);
        for (l, (w, (_, dense, _))) in ws.iter().zip(&layers).enumerate() {
            let view = &w.chunks()[0].view;
            assert_eq!(view.offset % align, 0, "layer {l}'s offset is aligned");
            assert_eq!(view.buffer, ws[0].chunks()[0].view.buffer, "one buffer");
            let x = rng.vec(k, 1.0);
            let xb = buffer_f32(&ctx, &x);
            let yb = poisoned(&ctx, n);
            let call = kernel.bind(&ctx, w, &xb, &yb).expect("bind");
            run(&ctx, |pass| call.record(pass));
            let got = read_f32(&ctx, &yb, n).await;
            let want = reference::matvec(dense, &x, k, n);
            let tol = dot_tolerance(dense, &x, k, REL);
            assert_within(&format!("stacked {format:?} layer {l}"), &got, &want, &tol);
        }
        // A layer of another shape: nothing is stacked, every weight keeps its own buffer.
        let (bytes, _, ty) = weights(&mut rng, format, k, n + 1);
        let mut other =
            GpuWeight::upload(&ctx, "w", ty, k as u64, n as u64 + 1, &bytes).expect("upload");
        let mut fresh = GpuWeight::upload(&ctx, "w", layers[0].2, k as u64, n as u64, &layers[0].0)
            .expect("upload");
        assert_eq!(
            GpuWeight::stack(&ctx, "stack", &mut [&mut fresh, &mut other]),
            None
        );
        assert_eq!(fresh.chunks()[0].view.offset, 0);
        assert_eq!(
            fresh.chunks()[0].view.size,
            fresh.chunks()[0].view.buffer.size()
        );
    }
}
gpu_test!(matvec_through_stacked_layer_weights, matvec_stacked);

async fn check_matmul(
    ctx: &GpuContext,
    kernel: &MatMul,
    k: usize,
    n: usize,
    n_tokens: usize,
    chunk: Option<u64>,
    seed: u64,
) {
    let format = kernel.format();
    let mut rng = Rng::new(seed);
    let (bytes, dense, ty) = weights(&mut rng, format, k, n);
    let x = rng.vec(k * n_tokens, 1.0);
    let w = match chunk {
        Some(max) => GpuWeight::upload_chunked(ctx, "w", ty, k as u64, n as u64, &bytes, max),
        None => GpuWeight::upload(ctx, "w", ty, k as u64, n as u64, &bytes),
    }
    .expect("upload");
    let st = state(ctx, 3, n_tokens as u32);
    let xb = buffer_f32(ctx, &x);
    let yb = poisoned(ctx, n * n_tokens);
    let call = kernel
        .bind(ctx, &w, &st, &xb, &yb, n_tokens as u32)
        .expect("bind");
    let mut rec = Ok(());
    run(ctx, |pass| rec = call.record(pass, n_tokens as u32));
    rec.expect("record");
    let got = read_f32(ctx, &yb, n * n_tokens).await;
    let want = reference::matmul(&dense, &x, k, n);
    let tol: Vec<f32> = x
        .chunks(k)
        .flat_map(|xt| dot_tolerance(&dense, xt, k, REL))
        .collect();
    let case = format!(
        "matmul {format:?} k={k} n={n} tokens={n_tokens} chunks={}",
        w.chunks().len()
    );
    assert_within(&case, &got, &want, &tol);
}

/// `format`'s matmul kernels for products of at most `rows` rows and `tokens` tokens: the wide
/// tile only where the context's rule reaches it, as a model load compiles them.
async fn matmul_for(ctx: &GpuContext, format: WeightFormat, rows: usize, tokens: usize) -> MatMul {
    MatMul::for_products(ctx, format, rows as u32, tokens as u32)
        .await
        .expect("matmul pipeline")
}

async fn matmul_all_formats() {
    let ctx = context().await;
    for (i, format) in WeightFormat::ALL.into_iter().enumerate() {
        let rows = shapes(format).iter().map(|s| s.1).max().unwrap_or(1);
        let kernel = matmul_for(&ctx, format, rows, 13).await;
        for (j, (k, n)) in shapes(format).into_iter().enumerate() {
            let n_tokens = [1, 7, 8, 13][j % 4];
            check_matmul(
                &ctx,
                &kernel,
                k,
                n,
                n_tokens,
                None,
                (100 + i * 10 + j) as u64,
            )
            .await;
        }
    }
}
gpu_test!(matmul_all_formats_match_reference, matmul_all_formats);

/// Edges of matmul.wgsl's 32-row x 32-token tiles and 64-value k slabs: token counts below,
/// across and at multiples of the tile (1, 7, 33, 128), row counts not a multiple of 32, and k
/// with a partial last slab (k % 64 = 32 for the 32-value block formats; any k for the float
/// formats; K-quants' k is a multiple of 256).
fn tile_edges(format: WeightFormat) -> Vec<(usize, usize, usize)> {
    match format {
        WeightFormat::Q2_K
        | WeightFormat::Q3_K
        | WeightFormat::Q4_K
        | WeightFormat::Q5_K
        | WeightFormat::Q6_K => {
            vec![(256, 100, 33), (768, 97, 128), (256, 31, 7)]
        }
        WeightFormat::F32 | WeightFormat::F16 | WeightFormat::BF16 => vec![
            (100, 33, 33),
            (33, 100, 128),
            (130, 97, 1),
            (64, 64, 7),
            (3, 40, 33),
        ],
        _ => vec![(96, 100, 33), (576, 97, 128), (32, 31, 7), (160, 64, 1)],
    }
}

async fn matmul_tile_edges() {
    let ctx = context().await;
    tile_edges_on(&ctx, &WeightFormat::ALL, usize::MAX).await;
}
gpu_test!(matmul_tile_edges_match_reference, matmul_tile_edges);

/// The same edges through matmul_coop.wgsl where the device has cooperative matrices (the GPU
/// machine: `bench/gpu test kernel_matmul`); elsewhere only the wiring (asked for, the tile is
/// used exactly where the device has it, never for F32 weights).
#[cfg(not(target_arch = "wasm32"))]
async fn matmul_coop_tile_edges() {
    let mut options = fuselm::gpu::ContextOptions::default();
    options.tuning.matmul_coop = Some(1);
    let ctx = common::gpu_context(options).await;
    let q4 = matmul_for(&ctx, WeightFormat::Q4_1, 64, 64).await;
    assert_eq!(q4.uses_coop(), ctx.coop_matrix_f16());
    let f32s = matmul_for(&ctx, WeightFormat::F32, 64, 64).await;
    assert!(!f32s.uses_coop(), "F32 weights stay on the SIMT tiles");
    println!("cooperative matrices: {}", q4.uses_coop());
    if q4.uses_coop() {
        tile_edges_on(&ctx, &WeightFormat::ALL, usize::MAX).await;
        for (i, (k, n)) in [(576, 576), (576, 1536), (1536, 576)]
            .into_iter()
            .enumerate()
        {
            let kernel = matmul_for(&ctx, WeightFormat::Q4_1, n, 200).await;
            check_matmul(&ctx, &kernel, k, n, [200, 64, 5][i], None, 900 + i as u64).await;
        }
    }
}
#[cfg(not(target_arch = "wasm32"))]
gpu_test!(
    matmul_coop_tile_edges_match_reference,
    matmul_coop_tile_edges
);

/// The same edges through matmul_wide.wgsl's 64-row x 64-token tiles and 32-value slabs (used
/// where they number `WIDE_FROM_GROUPS`; forced here for every product). The browser checks the
/// first edge case of three formats, one per decoder family (the wide kernel is one template over
/// the decoders that matmul_all_formats compiles there; each compile costs ~6 s on SwiftShader).
async fn matmul_wide_tile_edges() {
    let mut options = fuselm::gpu::ContextOptions::default();
    options.tuning.matmul_wide_from = Some(1);
    let ctx = common::gpu_context(options).await;
    if cfg!(target_arch = "wasm32") {
        let formats = [WeightFormat::Q4_0, WeightFormat::Q4_K, WeightFormat::F16];
        tile_edges_on(&ctx, &formats, 1).await;
    } else {
        tile_edges_on(&ctx, &WeightFormat::ALL, usize::MAX).await;
    }
}
gpu_test!(
    matmul_wide_tile_edges_match_reference,
    matmul_wide_tile_edges
);

/// [`tile_edges`]' first `cases` of each of `formats` through `ctx`'s kernels.
async fn tile_edges_on(ctx: &GpuContext, formats: &[WeightFormat], cases: usize) {
    for (i, &format) in formats.iter().enumerate() {
        let edges: Vec<_> = tile_edges(format).into_iter().take(cases).collect();
        let rows = edges.iter().map(|e| e.1).max().unwrap_or(1);
        let tokens = edges.iter().map(|e| e.2).max().unwrap_or(1);
        let kernel = matmul_for(ctx, format, rows, tokens).await;
        for (j, (k, n, n_tokens)) in edges.into_iter().enumerate() {
            check_matmul(
                ctx,
                &kernel,
                k,
                n,
                n_tokens,
                None,
                (400 + i * 10 + j) as u64,
            )
            .await;
        }
    }
}

/// SmolLM2-135M's prefill shapes at a 128-token batch: gate/up (k 576, n 1536) and down
/// (k 1536, n 576) in Q4_1, many slabs and several token tiles.
#[cfg_attr(target_arch = "wasm32", allow(dead_code))]
async fn matmul_smollm2_prefill_shapes() {
    let ctx = context().await;
    let kernel = matmul_for(&ctx, WeightFormat::Q4_1, 1536, 128).await;
    check_matmul(&ctx, &kernel, 576, 1536, 128, None, 500).await;
    check_matmul(&ctx, &kernel, 1536, 576, 128, None, 501).await;
}
// Native only: the same WGSL as the browser's matmul tests at a size SwiftShader takes about a
// minute for (two products of 113 M multiply-adds and their CPU reference).
native_test!(
    matmul_smollm2_prefill_shapes_match_reference,
    matmul_smollm2_prefill_shapes
);

/// More row tiles than maxComputeWorkgroupsPerDimension (2.1M rows at 32 per tile): the grid
/// folds into 2D. Native only: SwiftShader in the browser needs ~160 s for these 65,539
/// workgroups of 256, and the fold (`kernels::grid`, `linear_group`) is the same code there.
#[cfg(not(target_arch = "wasm32"))]
#[test]
fn matmul_row_tiles_beyond_one_grid_dimension() {
    pollster::block_on(async {
        let ctx = context().await;
        let max = ctx.device.limits().max_compute_workgroups_per_dimension as usize;
        let kernel = matmul_for(&ctx, WeightFormat::Q4_0, max * 32 + 100, 3).await;
        check_matmul(&ctx, &kernel, 32, max * 32 + 100, 3, None, 600).await;
    })
}

async fn matmul_many_tokens_chunked() {
    let ctx = context().await;
    let kernel = matmul_for(&ctx, WeightFormat::Q4_1, 192, 33).await;
    check_matmul(&ctx, &kernel, 576, 192, 33, Some(5000), 200).await;
    let kernel = matmul_for(&ctx, WeightFormat::F16, 45, 17).await;
    check_matmul(&ctx, &kernel, 33, 45, 17, Some(700), 201).await;
    // Chunks whose first rows are not a multiple of the 32-row tile, 128 tokens.
    let kernel = matmul_for(&ctx, WeightFormat::Q8_0, 300, 128).await;
    check_matmul(&ctx, &kernel, 64, 300, 128, Some(50 * 72), 202).await;
    let kernel = matmul_for(&ctx, WeightFormat::F32, 90, 40).await;
    check_matmul(&ctx, &kernel, 100, 90, 40, Some(37 * 400), 203).await;
}
gpu_test!(matmul_many_tokens_and_chunks, matmul_many_tokens_chunked);

/// The grid covers `max_tokens` but the kernel obeys `state.n_tokens`: rows past it stay
/// untouched (poison), so a step shorter than the dispatch writes nothing stray. Cases: inside
/// one token tile (8 dispatched, 3 in the step), and a step ending inside the second tile of a
/// dispatch of three (70 dispatched, 33 in the step: the third tile's workgroups exit at once).
async fn matmul_obeys_state() {
    let ctx = context().await;
    let mut rng = Rng::new(300);
    let (k, n) = (64, 40);
    let (bytes, _, ty) = weights(&mut rng, WeightFormat::Q8_0, k, n);
    let w = GpuWeight::upload(&ctx, "w", ty, k as u64, n as u64, &bytes).expect("upload");
    let kernel = matmul_for(&ctx, WeightFormat::Q8_0, n, 70).await;
    for (dispatched, in_step) in [(8, 3), (70, 33)] {
        let st = state(&ctx, 0, in_step as u32);
        let xb = buffer_f32(&ctx, &rng.vec(k * dispatched, 1.0));
        let yb = poisoned(&ctx, n * dispatched);
        let call = kernel
            .bind(&ctx, &w, &st, &xb, &yb, dispatched as u32)
            .expect("bind");
        run(&ctx, |pass| {
            call.record(pass, dispatched as u32).expect("record")
        });
        let got = read_u32(&ctx, &yb, n * dispatched).await;
        assert!(
            got[..in_step * n].iter().all(|v| *v != POISON),
            "rows < n_tokens written ({in_step} of {dispatched})"
        );
        assert!(
            got[in_step * n..].iter().all(|v| *v == POISON),
            "rows >= n_tokens untouched ({in_step} of {dispatched})"
        );
    }
}
gpu_test!(
    matmul_rows_past_state_n_tokens_untouched,
    matmul_obeys_state
);
