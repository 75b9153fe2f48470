// Fused decode, dispatch 4 of 4 per layer: down projection + residual, one token.
//
//   x[r] = x_mid[r] + W_down[r] . hidden
//
// ROWS = 256 / LANES row slots per workgroup of 256, LANES lanes per row (LANES is prepended:
// `kernels::fused_layer::lanes_for`), RPL rows per slot (prepended:
// `kernels::fused_layer::down_rows_per_lane`): lane `lane` of slot `s` takes units lane,
// lane + LANES, ... of rows base + s, base + s + ROWS, ... (RPL of them), so each hidden value
// it loads serves RPL rows. Every lane issues all its weight loads and the hidden values they
// meet (vec4 loads, from cache) before the state flag, so the kernel costs about one memory
// round trip; with a wide n_ff the hidden loads (the whole vector per row) outnumber the
// weight loads, and RPL > 1 divides them. Writes the residual stream `x` that the next
// layer's fused_qkv (or the head) reads. Shape constants are prepended (see fused_qkv.wgsl).
// With POST_NORMS (gemma3) the FFN output must be normalised before the residual add, which
// needs all of it: this kernel writes x = (x_mid, down) as the residual's base and delta, and
// the next consumer (the next layer's fused_qkv and fused_ffn_up, or fused_post_norm.wgsl
// before the head) applies the norm. When state.done is set the kernel returns at once.
// KV append (every architecture without QK_NORM): workgroup 0 also stores the step's new K and
// V (from fused_qkv's output) into the cache at row pos. It happens here, two dispatches after
// attention, so that the attention dispatch only reads the cache and can issue its key and
// value loads before it knows the step's position (fused_attention.wgsl); the next step's
// attention is the first to read row pos. With QK_NORM the stored key is the normalised,
// rotated one that only fused_attention computes, so it appends there.

@group(0) @binding(0) var<storage, read> state: State;
@group(0) @binding(1) var<storage, read> x_mid: array<f32>;        // [n_embd]
@group(0) @binding(2) var<storage, read> hidden: array<vec4<f32>>; // [n_ff / 4]
@group(0) @binding(3) var<storage, read> w: array<u32>;            // W_down [n_embd, n_ff]
@group(0) @binding(4) var<storage, read_write> x: array<f32>;      // [n_embd] (POST_NORMS: [2, n_embd])
@group(0) @binding(5) var<storage, read> qkv: array<vec4<f32>>;    // [(n_q + 2 n_kv) / 4]
@group(0) @binding(6) var<storage, read_write> k_cache: array<vec4<kv_t>>; // [n_head_kv, n_ctx, head_dim / 4]
@group(0) @binding(7) var<storage, read_write> v_cache: array<vec4<kv_t>>;

const WG: u32 = 256u;
const ROWS: u32 = WG / LANES;
const UNITS: u32 = N_FF / 8u;
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
    var ha: array<W8, PER_LANE>;
    var hs: array<f32, PER_LANE>;
    for (var j = 0u; j < PER_LANE; j++) {
        let u = min(lane + j * LANES, UNITS - 1u);
        for (var i = 0u; i < RPL; i++) {
            raw[j * RPL + i] = w_fetch(min(slot + i * ROWS, N_EMBD - 1u), u, N_FF);
        }
        ha[j] = W8(hidden[2u * u], hidden[2u * u + 1u]);
        hs[j] = sum8(ha[j]);
    }
    var resid = vec4<f32>();
    for (var i = 0u; i < RPL; i++) {
        resid[i] = x_mid[min(slot + i * ROWS, N_EMBD - 1u)];
    }
    if lid == 0u {
        flag_sh = state.done;
    }
    if workgroupUniformLoad(&flag_sh) != 0u {
        return;
    }
    if !QK_NORM && wg.x == 0u {
        let pos = state.pos;
        let hd4 = HEAD_DIM / 4u;
        for (var i = lid; i < N_HEAD_KV * hd4 && pos < N_CTX; i += WG) {
            let g = i / hd4;
            let row = kv_base + (g * N_CTX + pos) * hd4 + i % hd4;
            k_cache[row] = vec4<kv_t>(qkv[(N_HEAD * HEAD_DIM + g * HEAD_DIM) / 4u + i % hd4]);
            v_cache[row] = vec4<kv_t>(qkv[((N_HEAD + N_HEAD_KV) * HEAD_DIM + g * HEAD_DIM) / 4u + i % hd4]);
        }
    }
    var acc = vec4<f32>();
    for (var j = 0u; j < PER_LANE; j++) {
        let u = lane + j * LANES;
        if u < UNITS {
            for (var i = 0u; i < RPL; i++) {
                let row = min(slot + i * ROWS, N_EMBD - 1u);
                acc[i] += w_dot8(raw[j * RPL + i], row, u, N_FF, ha[j], hs[j]);
            }
        }
    }
    let t = row_sum4(lid, acc);
    for (var i = 0u; i < RPL; i++) {
        let row = slot + i * ROWS;
        if lane == 0u && row < N_EMBD {
            if POST_NORMS {
                x[row] = resid[i];
                x[N_EMBD + row] = t[i];
            } else {
                x[row] = resid[i] + t[i];
            }
        }
    }
}
