//! A bound fused dispatch ([`FusedCall`]): one bind group, a fixed grid, the layer on top of x.

use crate::kernels::pipeline::{Bound, PassState};

/// A bound fused dispatch with a fixed grid.
#[derive(Debug, Clone)]
pub struct FusedCall {
    pub(super) bound: Bound,
    pub(super) groups: [u32; 3],
}

impl FusedCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.dispatch(pass, self.groups);
    }

    /// Records layer `layer` of a layer kernel.
    pub fn record_at(&self, pass: &mut wgpu::ComputePass<'_>, layer: u32) {
        let [x, y, z] = self.groups;
        self.bound.dispatch(pass, [x + layer, y, z]);
    }

    /// [`FusedCall::record_at`], setting only what `state` says is not set.
    pub(crate) fn record_layer<'a>(
        &'a self,
        pass: &mut wgpu::ComputePass<'_>,
        state: &mut PassState<'a>,
        layer: u32,
    ) {
        let [x, y, z] = self.groups;
        self.bound.dispatch_tracked(pass, state, [x + layer, y, z]);
    }
}
