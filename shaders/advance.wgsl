// Moves the decode state to the next step on the GPU: the tokens of this step are now in the
// KV cache, and the next step decodes the one token argmax just wrote. One invocation.

@group(0) @binding(0) var<storage, read_write> state: State;

@compute @workgroup_size(1)
fn main() {
    state.pos += state.n_tokens;
    state.n_tokens = 1u;
}
