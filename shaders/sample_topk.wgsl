// Exact top-MAX_CANDIDATES selection in workgroup memory, shared by sample_select.wgsl and
// sample_choose.wgsl (prepended after sampler_params.wgsl). Holds SLOTS = 8 blocks of 128
// (z, id) keys (8 KiB); order is `better` (larger z, then lower id), which is total, so the
// result does not depend on the order keys arrive in.
//
// * `sort_blocks`: bitonic sort of each 128-block, best first (28 compare-swap stages).
// * `merge_tree`: pairs block b with block b + s (s = 1, 2, 4): C[t] = better of A[t] and
//   B[127 - t] is a bitonic sequence that holds the 128 best of A and B (A best first, B
//   reversed), and a 7-stage bitonic merge sorts it. After three levels block 0 holds the
//   128 best of all 1024 keys, sorted. No full sort of the vocabulary anywhere.
// Both must be called uniformly by all 256 invocations.

const TOPK_WG: u32 = 256u;
const BLOCK: u32 = 128u;
const SLOTS: u32 = 8u;
const KEYS: u32 = BLOCK * SLOTS;

var<workgroup> key_z: array<f32, KEYS>;
var<workgroup> key_id: array<u32, KEYS>;

fn cswap(i: u32, l: u32, best_first: bool) {
    // Puts the better key at i when best_first, else at l.
    let swap = select(better(key_z[i], key_id[i], key_z[l], key_id[l]),
                      better(key_z[l], key_id[l], key_z[i], key_id[i]), best_first);
    if swap {
        let tz = key_z[i];
        let ti = key_id[i];
        key_z[i] = key_z[l];
        key_id[i] = key_id[l];
        key_z[l] = tz;
        key_id[l] = ti;
    }
}

fn sort_blocks(lid: u32) {
    for (var k = 2u; k <= BLOCK; k <<= 1u) {
        for (var j = k >> 1u; j > 0u; j >>= 1u) {
            for (var i = lid; i < KEYS; i += TOPK_WG) {
                let l = i ^ j;
                if l > i {
                    cswap(i, l, k == BLOCK || (i & k) == 0u);
                }
            }
            workgroupBarrier();
        }
    }
}

fn merge_tree(lid: u32) {
    for (var s = 1u; s < SLOTS; s <<= 1u) {
        let pairs = SLOTS / (2u * s);
        for (var idx = lid; idx < pairs * BLOCK; idx += TOPK_WG) {
            let a = (idx / BLOCK) * 2u * s * BLOCK + idx % BLOCK;
            let b = (idx / BLOCK) * 2u * s * BLOCK + s * BLOCK + (BLOCK - 1u - idx % BLOCK);
            if better(key_z[b], key_id[b], key_z[a], key_id[a]) {
                key_z[a] = key_z[b];
                key_id[a] = key_id[b];
            }
        }
        workgroupBarrier();
        for (var j = BLOCK >> 1u; j > 0u; j >>= 1u) {
            for (var idx = lid; idx < pairs * BLOCK; idx += TOPK_WG) {
                let i = (idx / BLOCK) * 2u * s * BLOCK + idx % BLOCK;
                let l = i ^ j;
                if l > i {
                    cswap(i, l, true);
                }
            }
            workgroupBarrier();
        }
    }
}
