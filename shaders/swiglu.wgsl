// Gated FFN activation, elementwise over this step's tokens: out = act(gate) * up, with
// act = silu(x) = x / (1 + exp(-x)) (SwiGLU: llama, qwen) or, when p.gelu is 1, GELU's tanh
// approximation 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) (GeGLU: gemma). One invocation per value; the grid is 1D folded into
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
    var a = g / (1.0 + exp(-g));
    if p.gelu == 1u {
        // tanh's argument is clamped: tanh(15) is 1 in f32, and a tanh computed from exp would
        // overflow to inf / inf beyond ~44.
        a = 0.5 * g * (1.0 + tanh(clamp(0.7978846 * g * (1.0 + 0.044715 * g * g), -15.0, 15.0)));
    }
    out[i] = a * up[i];
}
