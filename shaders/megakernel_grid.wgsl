// The megakernel's grid mode (GRID_MODE; strategy `megakernel-grid`): its barrier, the
// occupancy discovery and the phases that split a position over GRID workgroups. Composed
// after megakernel.wgsl, whose header holds the synchronization argument; compiled into the
// portable version too, where GRID_MODE is false and none of it runs.


// A grid barrier: returns when all GRID workgroups have arrived (or the error flag is set:
// a bounded spin that runs out sets it, and it releases every later waiter at once).
fn gsync(lid: u32) {
    storageBarrier();
    workgroupBarrier();
    if !GRID_MODE {
        return;
    }
    gb_n += 1u;
    if lid == 0u {
        atomicAdd(&grid_sync[0], 1u);
        let goal = GRID * gb_n;
        var arrived = 0u;
        for (var i = 0u; i < SPIN_MAX; i++) {
            arrived = atomicLoad(&grid_sync[0]);
            if arrived >= goal || atomicLoad(&grid_sync[1]) != 0u {
                break;
            }
        }
        if arrived < goal && atomicLoad(&grid_sync[1]) == 0u {
            atomicOr(&grid_sync[1], G_TIMEOUT);
        }
    }
    workgroupBarrier();
    storageBarrier();
}

// The grid's error flags (uniform).
fn grid_error(lid: u32) -> u32 {
    if lid == 0u {
        ok_sh = atomicLoad(&grid_sync[1]);
    }
    return workgroupUniformLoad(&ok_sh);
}

// Occupancy discovery (invocation 0 of each workgroup; after Sorensen et al.): while the poll
// is open a workgroup takes a ticket and stays until it closes; the first holder closes it
// after DISCOVER_POLLS polls; late workgroups leave. Tickets = workgroups resident at once.
fn discover() {
    if atomicLoad(&grid_sync[2]) != 0u {
        return;
    }
    let t = atomicAdd(&grid_sync[3], 1u);
    if t == 0u {
        var seen = 0u;
        for (var i = 0u; i < DISCOVER_POLLS; i++) {
            seen = max(seen, atomicLoad(&grid_sync[3]));
        }
        atomicMax(&grid_sync[0], seen);
        atomicStore(&grid_sync[2], 1u);
    } else {
        for (var i = 0u; i < SPIN_MAX; i++) {
            if atomicLoad(&grid_sync[2]) != 0u {
                break;
            }
        }
    }
}

// Attention of this workgroup's heads (h = wid, wid + GRID, …) over positions 0..=c of layer
// l → S_ATT, from the raw projections at S_TMP. Position c's K and V come from the
// workgroup's own copy; the first head of each KV group stores them as row c of the cache.
fn attention_grid(lid: u32, wid: u32, l: u32, c: u32) {
    for (var h = wid; h < N_HEAD; h += GRID) {
        let g = h / GROUP;
        for (var d = lid; d < HEAD_DIM; d += WG) {
            qh_sh[d] = rope_at(S_TMP + h * HEAD_DIM, d, c);
            kc_sh[g * HEAD_DIM + d] = rope_at(S_TMP + N_Q + g * HEAD_DIM, d, c);
            vc_sh[g * HEAD_DIM + d] = sget(S_TMP + N_Q + N_KV + g * HEAD_DIM + d);
        }
        workgroupBarrier();
        if h % GROUP == 0u {
            for (var d = lid; d < HEAD_DIM; d += WG) {
                kv[kv_base(l, 0u, g) + c * HEAD_DIM + d] = kc_sh[g * HEAD_DIM + d];
                kv[kv_base(l, 1u, g) + c * HEAD_DIM + d] = vc_sh[g * HEAD_DIM + d];
            }
        }
        attend_head(lid, l, c, h, true, true, S_SC + h * N_CTX);
    }
}

fn layer_grid(lid: u32, wid: u32, l: u32, c: u32) {
    let t = TABLE_LAYERS + l * TABLE_STRIDE;
    norm_to_vin(lid, tab(t + 14u));
    let pq = npass(N_Q);
    let pk = npass(N_KV);
    matvec(lid, wid, 0u, t, N_Q, N_EMBD, NONE, S_TMP);
    matvec(lid, wid, pq, t + 2u, N_KV, N_EMBD, NONE, S_TMP + N_Q);
    matvec(lid, wid, pq + pk, t + 4u, N_KV, N_EMBD, NONE, S_TMP + N_Q + N_KV);
    gsync(lid);
    attention_grid(lid, wid, l, c);
    gsync(lid);
    for (var i = lid; i < N_Q; i += WG) {
        vin_sh[i] = sget(S_ATT + i);
    }
    workgroupBarrier();
    matvec(lid, wid, 0u, t + 6u, N_EMBD, N_Q, NONE, S_OUT);
    gsync(lid);
    add_norm_to_vin(lid, S_OUT, tab(t + 15u));
    matvec(lid, wid, 0u, t + 8u, N_FF, N_EMBD, NONE, S_GATE);
    matvec(lid, wid, npass(N_FF), t + 10u, N_FF, N_EMBD, NONE, S_UP);
    gsync(lid);
    for (var i = lid; i < N_FF; i += WG) {
        vin_sh[i] = silu(sget(S_GATE + i)) * sget(S_UP + i);
    }
    workgroupBarrier();
    matvec(lid, wid, 0u, t + 12u, N_EMBD, N_FF, NONE, S_OUT);
    gsync(lid);
    add_residual(lid, S_OUT);
}

// The head over this workgroup's rows with penalties, each workgroup's best (greedy) to
// S_PART; after a grid barrier every workgroup merges them (greedy: all get the same id), or
// workgroup 0 samples from the logits (its id is the one committed).
fn choose_grid(lid: u32, wid: u32, c: u32) -> u32 {
    norm_to_vin(lid, tab(4u));
    let fmt = tab(2u);
    let row_base = tab(3u);
    let lane = lid % ML;
    let units = N_EMBD / 8u;
    var bz = 0.0;
    var bi = NONE;
    let masks = constraint_mask_at();
    // The bound in a `let`: the loop prover (src/gpu/loop_proof.rs) accepts no call in a test.
    let passes = npass(N_VOCAB);
    for (var ps = wid; ps < passes; ps += GRID) {
        let r0 = ps * RPP * RPI + lid / ML;
        let r = min(r0, N_VOCAB - 1u);
        var acc = vec4<f32>();
        for (var u = lane; u < units; u += ML) {
            acc.x += dot8(w8(fmt, row_base + r, u, N_EMBD), in8(NONE, u));
        }
        let total = mv_sum4(lid, acc).x;
        if lane == 0u && r0 < N_VOCAB {
            var v = total;
            if sampler.penalties_on != 0u || p.ctab != 0u {
                v = penalize(v, masked_count(r0, masks), sampler);
            }
            sset(S_LOGITS + r0, v);
            if non_finite(v) {
                bz = NONFINITE_Z;
                bi = NONFINITE;
            } else if bi == NONE || better(v, r0, bz, bi) {
                bz = v;
                bi = r0;
            }
        }
    }
    let mine = wg_best(lid, bz, bi);
    if lid == 0u {
        s[S_PART + 2u * wid] = mine.x;
        s[S_PART + 2u * wid + 1u] = mine.y;
    }
    gsync(lid);
    // Every workgroup's best: the choice when greedy; NONFINITE when any logit was not finite.
    bz = 0.0;
    bi = NONE;
    for (var i = lid; i < GRID; i += WG) {
        let z = bitcast<f32>(s[S_PART + 2u * i]);
        let id = s[S_PART + 2u * i + 1u];
        if id != NONE && (bi == NONE || better(z, id, bz, bi)) {
            bz = z;
            bi = id;
        }
    }
    let top = uniform_top(lid, wg_best(lid, bz, bi).y);
    if sampler.inv_temperature == 0.0 || top == NONFINITE {
        return top;
    }
    var id = NONE;
    if wid == 0u {
        id = sample_logits(lid, c);
    }
    return id;
}
