// Fused decode, POST_NORMS models (gemma3) only: the last layer's deferred post-FFN norm,
// once per step before the head (see fused_ffn_down.wgsl):
//
//   x_out = base + delta * pf_w / sqrt(mean(delta^2) + eps),   x = (base, delta)
//
// One workgroup of 256; each invocation owns vec4s lid, lid + 256, ... of the vectors. Shape
// constants are prepended (see fused_qkv.wgsl). When state.done is set the kernel returns at
// once.

struct Params {
    eps: f32,
    pf_off: u32, // the last layer's post-FFN norm weights in `vecs` (floats)
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> x: array<vec4<f32>>;          // [2, n_embd / 4]
@group(0) @binding(3) var<storage, read> vecs: array<vec4<f32>>;       // the vector arena
@group(0) @binding(4) var<storage, read_write> x_out: array<vec4<f32>>; // [n_embd / 4]

const WG: u32 = 256u;
const V4: u32 = N_EMBD / 4u;
const V4_PER: u32 = (V4 + WG - 1u) / WG;

var<workgroup> flag_sh: u32;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    var dv: array<vec4<f32>, V4_PER>;
    var dd = 0.0;
    for (var k = 0u; k < V4_PER; k++) {
        let i = lid + k * WG;
        if i < V4 {
            dv[k] = x[V4 + i];
            dd += dot(dv[k], dv[k]);
        }
    }
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    let sd = inverseSqrt(lanes_sum4(lid, vec4<f32>(dd, 0.0, 0.0, 0.0), WG).x / f32(N_EMBD) + p.eps);
    for (var k = 0u; k < V4_PER; k++) {
        let i = lid + k * WG;
        if i < V4 {
            x_out[i] = x[i] + dv[k] * sd * vecs[p.pf_off / 4u + i];
        }
    }
}
