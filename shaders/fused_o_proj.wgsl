// Fused decode, the attention output projection as a dispatch of its own (one token), where
// the attention partials would be large (kernels::fused_layer::o_split: MHA models at 3072
// wide, e.g. Phi-3-mini):
//
//   x_mid[r] = x[r] + Wo[r] . o
//
// o is fused_attention.wgsl's output with O_SPLIT: every head's normalised attention output,
// side by side (n_head * head_dim floats at the start of `part`). In fused_attention itself
// each of Phi-3-mini's 32 heads streamed its 96 columns of Wo in 6 row blocks (192 workgroups,
// 16 serial passes each, ~0.2 TB/s); here the rows spread over every SM like fused_ffn_down's.
// Layout as fused_ffn_down.wgsl: ROWS = 256 / LANES row slots per workgroup, LANES lanes per
// row (prepended), RPL rows per lane (prepended), every weight and o load issued before the
// state flag. Shape constants are prepended (see fused_qkv.wgsl). When state.done is set the
// kernel returns at once.

@group(0) @binding(0) var<storage, read> state: State;
@group(0) @binding(1) var<storage, read> x: array<f32>;             // [n_embd] the residual
@group(0) @binding(2) var<storage, read> o: array<vec4<f32>>;       // [n_q / 4] (in `part`)
@group(0) @binding(3) var<storage, read> w: array<u32>;             // Wo [n_embd, n_q]
@group(0) @binding(4) var<storage, read_write> x_mid: array<f32>;   // [n_embd]

const WG: u32 = 256u;
const ROWS: u32 = WG / LANES;
const N_Q: u32 = N_HEAD * HEAD_DIM;
const UNITS: u32 = N_Q / 8u;
const PER_LANE: u32 = (UNITS + LANES - 1u) / LANES;

var<workgroup> flag_sh: u32;

@compute @workgroup_size(WG)
fn main(
    @builtin(workgroup_id) wg: vec3<u32>,
    @builtin(num_workgroups) nwg: vec3<u32>,
    @builtin(local_invocation_index) lid: u32,
) {
    if wg.x >= X_BASE {
        return; // extra columns carry the layer (kernels::fused_layer::LayerIndexing)
    }
    enter_layer(nwg.x);
    let lane = lid % LANES;
    let slot = wg.x * ROWS * RPL + lid / LANES; // the lane's first row; the others follow by ROWS
    var raw: array<vec4<u32>, PER_LANE * RPL>;
    var oa: array<W8, PER_LANE>;
    var osum: array<f32, PER_LANE>;
    for (var j = 0u; j < PER_LANE; j++) {
        let u = min(lane + j * LANES, UNITS - 1u);
        for (var i = 0u; i < RPL; i++) {
            raw[j * RPL + i] = w_fetch(min(slot + i * ROWS, N_EMBD - 1u), u, N_Q);
        }
        oa[j] = W8(o[2u * u], o[2u * u + 1u]);
        osum[j] = sum8(oa[j]);
    }
    var resid = vec4<f32>();
    for (var i = 0u; i < RPL; i++) {
        resid[i] = x[min(slot + i * ROWS, N_EMBD - 1u)];
    }
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    var acc = vec4<f32>();
    for (var j = 0u; j < PER_LANE; j++) {
        let u = lane + j * LANES;
        if u < UNITS {
            for (var i = 0u; i < RPL; i++) {
                let row = min(slot + i * ROWS, N_EMBD - 1u);
                acc[i] += w_dot8(raw[j * RPL + i], row, u, N_Q, oa[j], osum[j]);
            }
        }
    }
    let t = row_sum4(lid, acc);
    for (var i = 0u; i < RPL; i++) {
        let row = slot + i * ROWS;
        if lane == 0u && row < N_EMBD {
            x_mid[row] = resid[i] + t[i];
        }
    }
}
