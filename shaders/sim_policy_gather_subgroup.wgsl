// The MLP's hidden layer spread over LANES lanes of one subgroup (sim_policy.wgsl): unit
// j = k LANES + l is lane l's k-th, read with a subgroup shuffle. Every lane of the member
// takes part (they branch alike: same state, same action), so the lanes read are active.

fn policy_gather(mine: array<f32, HPL_LEN>) -> array<f32, HIDDEN_LEN> {
    var hid: array<f32, HIDDEN_LEN>;
    for (var k = 0u; k < HPL; k++) {
        for (var l = 0u; l < LANES; l++) {
            let v = subgroupShuffle(mine[k], psg0 + l);
            if k * LANES + l < HIDDEN {
                hid[k * LANES + l] = v;
            }
        }
    }
    return hid;
}
