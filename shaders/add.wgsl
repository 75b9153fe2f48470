// Residual add, in place: acc += delta over this step's tokens (with p.broadcast = 1, delta is
// one row added to every token's: a bias). In place because the residual
// stream is one buffer that every layer adds into; WebGPU forbids binding one buffer as both
// read and read_write in a dispatch, so an out-of-place x = x + y would need a copy.

struct Params {
    n: u32, // values per token (n_embd)
    broadcast: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> state: State;
@group(0) @binding(2) var<storage, read> delta: array<f32>;     // [n_tokens, n], or [n] if broadcast
@group(0) @binding(3) var<storage, read_write> acc: array<f32>; // [n_tokens, n]

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
    acc[i] += delta[select(i, i % p.n, p.broadcast == 1u)];
}
