// The MLP's hidden layer when one invocation computes all of it (LANES = 1, HPL = HIDDEN):
// nothing to gather. The other version, sim_policy_gather_subgroup.wgsl, reads other lanes'.

fn policy_gather(mine: array<f32, HPL_LEN>) -> array<f32, HIDDEN_LEN> {
    var hid: array<f32, HIDDEN_LEN>;
    for (var j = 0u; j < HIDDEN; j++) {
        hid[j] = mine[j];
    }
    return hid;
}
