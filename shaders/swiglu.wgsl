// Gated FFN activation, elementwise over this step's tokens: out = act(gate) * up, with
// act = silu (SwiGLU: llama, qwen) or, when p.gelu is 1, GELU's tanh approximation
// (GeGLU: gemma); both in common.wgsl. One invocation per value; the grid is 1D folded into
// 2D when it exceeds maxComputeWorkgroupsPerDimension.

struct Params {
    n: u32, // values per token (n_ff)
    gelu: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> gate: array<f32>;      // [n_tokens, n]
@group(0) @binding(3) var<storage, read> up: array<f32>;        // [n_tokens, n]
@group(0) @binding(4) var<storage, read_write> out: array<f32>; // [n_tokens, n]

const WG: u32 = 256u;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    let i = linear_group(wg, nwg) * WG + lid;
    if i >= state.n_tokens * p.n {
        return;
    }
    let g = gate[i];
    var a = silu(g);
    if p.gelu == 1u {
        a = gelu_tanh(g);
    }
    out[i] = a * up[i];
}
