// The per-workgroup RMS-norm helpers of the fused kernels (fused_qkv, fused_ffn_up,
// head_logits), prepended after common.wgsl: each of those workgroups normalises the whole
// residual row into workgroup memory (`xn`) instead of paying a dispatch boundary for it.
// Workgroups are 256 invocations.

const MAX_EMBD: u32 = 2048u; // kernels::fused_layer::MAX_EMBD
const NORM_WG: u32 = 256u;

var<workgroup> xn: array<f32, MAX_EMBD>;
var<workgroup> norm_red: array<f32, NORM_WG>;

// Elements [8u, 8u + 8) of the normalised row.
fn xn_load8(u: u32) -> W8 {
    let i = 8u * u;
    return W8(
        vec4<f32>(xn[i], xn[i + 1u], xn[i + 2u], xn[i + 3u]),
        vec4<f32>(xn[i + 4u], xn[i + 5u], xn[i + 6u], xn[i + 7u]),
    );
}

// Sum of `v` over the workgroup (every invocation gets it). Must be called uniformly.
fn wg_sum(lid: u32, v: f32) -> f32 {
    norm_red[lid] = v;
    for (var s = NORM_WG / 2u; s > 0u; s >>= 1u) {
        workgroupBarrier();
        if lid < s {
            norm_red[lid] += norm_red[lid + s];
        }
    }
    workgroupBarrier();
    let r = norm_red[0];
    workgroupBarrier();
    return r;
}
