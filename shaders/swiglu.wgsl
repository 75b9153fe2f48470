// SwiGLU gate of the llama FFN: out = silu(gate) * up, silu(x) = x / (1 + exp(-x)),
// elementwise over this step's tokens. One invocation per value; the grid is 1D folded into
// 2D when it exceeds maxComputeWorkgroupsPerDimension.

struct Params {
    n: u32, // values per token (n_ff)
    _pad0: u32,
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
    out[i] = g / (1.0 + exp(-g)) * up[i];
}
