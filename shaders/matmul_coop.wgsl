// Prefill matrix product on cooperative matrices (tensor cores): Y[t][row0 + r] =
// sum_c W[r][c] * X[t][c] for t < state.n_tokens, as matmul.wgsl, where the adapter has
// 16 x 16 x 16 f16 x f16 -> f32 cooperative matrices and 32-wide subgroups (kernels::matmul
// decides; composed after `enable f16; enable wgpu_cooperative_matrix;`).
//
// A workgroup of 4 subgroups computes ROWS = 32 weight rows x TOKENS = 64 tokens, stepping over
// k in slabs of SLAB = 64 values:
//   1. every invocation decodes two 8-value weight units of a row (w_decode, in f32 as every
//      other kernel) and loads a 4-value quad of X for 8 tokens; each row's and each token's 64
//      values of the slab are scaled by a power of two that puts their largest magnitude in
//      [2^13, 2^14) (the maximum over the lanes that hold them, by subgroup shuffles), and each
//      scaled value v is stored as two f16 halves, hi (v's top 11 significand bits, exact in
//      f16) and lo = f16(v - hi);
//   2. barrier; subgroup s multiplies row fragment s % 2 (16 rows) by token fragments
//      2 * (s / 2) and 2 * (s / 2) + 1, four k steps of 16, with three products per step:
//      lo*hi + hi*lo + hi*hi, into a fresh f32 accumulator, stored to workgroup memory;
//   3. barrier; every invocation adds its 16 outputs of the slab, scaled back exactly (the
//      powers of two of the row and the token, kept per slab in two buffers), to registers.
// Exactness: a value's two halves carry 22 of f32's 24 significand bits (the scaling keeps lo a
// normal f16 for every value within 2^-16 of its row's or token's largest; smaller ones keep
// hi's 11 bits, an error below 2^-27 of the largest), every f16 product is exact in f32, and
// the omitted lo*lo term is below 2^-22 of each product: the result is the f32 product's up to
// the order of the sums (as the 32 x 32 and 64 x 64 SIMT tiles differ from each other), for
// slabs whose largest magnitudes lie between 2^-100 and 2^64 (a slab's power of two is chosen
// from its own values; beyond, ldexp's range ends). Subnormal f16 values are never needed, so a
// device that flushes them gives the same result.
//
// Workgroup memory: W halves [ROWS][PITCH] f16 x 2 = 9 KiB, X halves [TOKENS][PITCH] f16 x 2 =
// 18 KiB (PITCH = SLAB + 8: rows 144 bytes apart, so the 16-byte rows of a fragment load fall in
// distinct banks), the slab's output tile [TOKENS][ROWS] f32 = 8 KiB, exponents 0.75 KiB:
// 36,608 bytes (kernels::matmul::COOP_WORKGROUP_BYTES).
//
// Ragged shapes as matmul.wgsl: units past k, rows past n_rows and tokens past state.n_tokens
// are stored as zeros and never written out. Grid: x/y = row tiles (folded 2D,
// `linear_group`), z = token tiles; whole workgroups past the step or the rows skip the slabs.
// Invocation roles come from the subgroup and the lane (`subgroup_id`, `subgroup_invocation_id`),
// so the lanes that share a row or a token are lanes of one subgroup.

const WG: u32 = 128u;
const ROWS: u32 = 32u;   // must match kernels::matmul::COOP_ROWS
const TOKENS: u32 = 64u; // must match kernels::matmul::COOP_TOKENS
const SLAB: u32 = 64u;   // k values per step
const PITCH: u32 = 72u;  // f16 elements between rows of w_hi / x_hi

var<workgroup> w_hi: array<f16, 2304>; // [ROWS][PITCH]
var<workgroup> w_lo: array<f16, 2304>;
var<workgroup> x_hi: array<f16, 4608>; // [TOKENS][PITCH]
var<workgroup> x_lo: array<f16, 4608>;
var<workgroup> y_sh: array<f32, 2048>; // [TOKENS][ROWS]: the slab's products
var<workgroup> row_exp: array<i32, 64>; // [2][ROWS]: frexp exponent of each row's largest
var<workgroup> tok_exp: array<i32, 128>; // [2][TOKENS]

fn max4(v: vec4<f32>) -> f32 {
    let a = abs(v);
    return max(max(a.x, a.y), max(a.z, a.w));
}

// The exponent e of m = f * 2^e (f in [0.5, 1)), at least -100 (so that 2^(14 - e) and the
// rescale's 2^(er + et - 28) stay within ldexp's range); 0 for m = 0. Values scaled by
// 2^(14 - e) are below 2^14 in magnitude.
fn exponent_of(m: f32) -> i32 {
    return max(frexp(m).exp, -100);
}

// v * 2^(14 - e) as two f16 halves: hi keeps the scaled value's sign, exponent and top 10
// stored significand bits (its f32 bits with the low 13 cleared: exact in f16), lo the rest
// (exact in f32, rounded to f16's 11 bits). (Written with bits rather than
// `f32(f16(v))`: the H200's driver folded that round trip to v, leaving lo zero.)
fn halves(v: vec4<f32>, e: i32) -> array<vec4<f16>, 2> {
    let sv = ldexp(v, vec4<i32>(14 - e));
    let hi = bitcast<vec4<f32>>(bitcast<vec4<u32>>(sv) & vec4<u32>(0xffffe000u));
    return array<vec4<f16>, 2>(vec4<f16>(hi), vec4<f16>(sv - hi));
}

// Stores v's halves (`halves`) at w_hi[i .. i + 4], w_lo[i .. i + 4].
fn store_w(i: u32, v: vec4<f32>, e: i32) {
    let h = halves(v, e);
    for (var j = 0u; j < 4u; j++) {
        w_hi[i + j] = h[0][j];
        w_lo[i + j] = h[1][j];
    }
}

fn store_x(i: u32, v: vec4<f32>, e: i32) {
    let h = halves(v, e);
    for (var j = 0u; j < 4u; j++) {
        x_hi[i + j] = h[0][j];
        x_lo[i + j] = h[1][j];
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
) {
    let n_tokens = state.n_tokens;
    let r0 = linear_group(wg, nwg) * ROWS; // first row of this tile (in the chunk)
    let t0 = wg.z * TOKENS;                // first token of this tile
    // The folded grid's spare groups and tiles past the step run no slab (no early return:
    // naga's uniformity analysis refuses cooperative operations after one).
    let live = r0 < p.n_rows && t0 < n_tokens;
    let units = (p.k + 7u) / 8u;
    let slabs = select(0u, (p.k + SLAB - 1u) / SLAB, live);
    let lid = sg * 32u + lane;

    // Loader roles: units 2 wq and 2 wq + 1 of row wr (4 lanes a row); quad lq of tokens
    // lt + 8 j (16 lanes a token).
    let wr = lid / 4u;
    let wq = lid % 4u;
    let w_row = r0 + wr;
    let w_ok = w_row < p.n_rows;
    let lq = lid % 16u;
    let lt = lid / 16u;
    // Compute role: row fragment rf, token fragments tf and tf + 1.
    let rf = sg % 2u;
    let tf = 2u * (sg / 2u);

    var acc: array<f32, 16>; // outputs lid + 128 j: token (lid + 128 j) / 32, row lid % 32
    for (var s = 0u; s < slabs; s++) {
        let buf = s % 2u;
        // Weights: two units, the row's largest over its four lanes.
        var wa = W8(vec4<f32>(), vec4<f32>());
        var wb = W8(vec4<f32>(), vec4<f32>());
        let u = s * (SLAB / 8u) + 2u * wq;
        if w_ok && u < units {
            wa = w_decode(w_fetch(w_row, u, p.k), w_row, u, p.k);
        }
        if w_ok && u + 1u < units {
            wb = w_decode(w_fetch(w_row, u + 1u, p.k), w_row, u + 1u, p.k);
        }
        var m = max(max(max4(wa.a), max4(wa.b)), max(max4(wb.a), max4(wb.b)));
        m = max(m, subgroupShuffleXor(m, 1u));
        m = max(m, subgroupShuffleXor(m, 2u));
        let ew = exponent_of(m);
        let iw = wr * PITCH + 16u * wq;
        store_w(iw, wa.a, ew);
        store_w(iw + 4u, wa.b, ew);
        store_w(iw + 8u, wb.a, ew);
        store_w(iw + 12u, wb.b, ew);
        if wq == 0u {
            row_exp[buf * ROWS + wr] = ew;
        }
        // X: eight tokens' quads, each token's largest over its sixteen lanes.
        for (var j = 0u; j < 8u; j++) {
            let t = lt + 8u * j;
            let v = x_quad(t0 + t, s * SLAB + 4u * lq, n_tokens);
            var mx = max4(v);
            mx = max(mx, subgroupShuffleXor(mx, 1u));
            mx = max(mx, subgroupShuffleXor(mx, 2u));
            mx = max(mx, subgroupShuffleXor(mx, 4u));
            mx = max(mx, subgroupShuffleXor(mx, 8u));
            let ex = exponent_of(mx);
            store_x(t * PITCH + 4u * lq, v, ex);
            if lq == 0u {
                tok_exp[buf * TOKENS + t] = ex;
            }
        }
        workgroupBarrier();

        // (Every index and stride of a cooperative operation is a `let` of its own: naga 30's
        // SPIR-V writer fails on expressions inside its pointer arguments.)
        var c0 = coop_mat16x16<f32, C>();
        var c1 = coop_mat16x16<f32, C>();
        for (var kk = 0u; kk < SLAB; kk += 16u) {
            let ia = rf * 16u * PITCH + kk;
            let ib0 = tf * 16u * PITCH + kk;
            let ib1 = ib0 + 16u * PITCH;
            let pitch = PITCH;
            let ah = coopLoadT<coop_mat16x16<f16, A>>(&w_hi[ia], pitch);
            let al = coopLoadT<coop_mat16x16<f16, A>>(&w_lo[ia], pitch);
            let bh0 = coopLoad<coop_mat16x16<f16, B>>(&x_hi[ib0], pitch);
            let bl0 = coopLoad<coop_mat16x16<f16, B>>(&x_lo[ib0], pitch);
            let bh1 = coopLoad<coop_mat16x16<f16, B>>(&x_hi[ib1], pitch);
            let bl1 = coopLoad<coop_mat16x16<f16, B>>(&x_lo[ib1], pitch);
            c0 = coopMultiplyAdd(al, bh0, c0);
            c0 = coopMultiplyAdd(ah, bl0, c0);
            c0 = coopMultiplyAdd(ah, bh0, c0);
            c1 = coopMultiplyAdd(al, bh1, c1);
            c1 = coopMultiplyAdd(ah, bl1, c1);
            c1 = coopMultiplyAdd(ah, bh1, c1);
        }
        // The slab's products (column-major [token][row]), then scaled back into registers.
        let rows = ROWS;
        let io0 = tf * 16u * ROWS + rf * 16u;
        let io1 = io0 + 16u * ROWS;
        coopStore(c0, &y_sh[io0], rows);
        coopStore(c1, &y_sh[io1], rows);
        workgroupBarrier();
        let er = row_exp[buf * ROWS + lid % ROWS];
        for (var j = 0u; j < 16u; j++) {
            let i = lid + WG * j;
            let et = tok_exp[buf * TOKENS + i / ROWS];
            acc[j] += ldexp(y_sh[i], er + et - 28);
        }
    }

    for (var j = 0u; j < 16u; j++) {
        let i = lid + WG * j;
        let r = r0 + i % ROWS;
        let t = t0 + i / ROWS;
        if live && r < p.n_rows && t < n_tokens {
            y[t * p.n + p.row0 + r] = acc[j];
        }
    }
}
