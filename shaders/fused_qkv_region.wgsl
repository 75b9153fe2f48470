// fused_qkv's weight loops for one of its weight bindings: instantiated by
// kernels::fused_layer::FusedQkv for wq, wk and wv (`{W}` replaced), so each loop reads one
// binding in one format and fused_qkv.wgsl chooses the region once per pass, outside the loops.

// The weight words of this lane's units of its RPL rows of the pass at `slot0` (all loads
// issued together; slots past the end read the last row).
fn fetch_{W}(slot0: u32, r: u32, lane: u32) -> array<vec4<u32>, PER_LANE * RPL> {
    var raw: array<vec4<u32>, PER_LANE * RPL>;
    for (var j = 0u; j < PER_LANE; j++) {
        let u = min(lane + j * LANES, UNITS - 1u);
        for (var i = 0u; i < RPL; i++) {
            raw[j * RPL + i] = {W}_fetch(slot_row(slot0, i * ROWS + r).row, u, N_EMBD);
        }
    }
    return raw;
}

// This lane's share of W . (x * norm_w) for each of its RPL rows (component i: row i).
fn dots_{W}(slot0: u32, r: u32, lane: u32, raw: array<vec4<u32>, PER_LANE * RPL>, xw: array<W8, PER_LANE>, xs: array<f32, PER_LANE>) -> vec4<f32> {
    var acc = vec4<f32>();
    for (var j = 0u; j < PER_LANE; j++) {
        let u = lane + j * LANES;
        if u < UNITS {
            for (var i = 0u; i < RPL; i++) {
                let row = slot_row(slot0, i * ROWS + r).row;
                acc[i] += {W}_dot8(raw[j * RPL + i], row, u, N_EMBD, xw[j], xs[j]);
            }
        }
    }
    return acc;
}
