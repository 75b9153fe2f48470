//! `fused_post_norm`: the last layer's deferred post-FFN norm, once per step before the head
//! (POST_NORMS models).

use super::call::FusedCall;
use super::limits::WORKGROUP;
use super::shape::FusedShape;
use super::vectors::check_vectors;
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::kernels::checks::check_buffer;
use crate::kernels::pipeline::{compose, Pipeline, Slot};
use crate::shaders;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct PostNormParams {
    eps: f32,
    pf_off: u32,
    _pad: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<PostNormParams>() == 16);

/// `POST_NORMS` models, once per step before the head: the last layer's deferred post-FFN
/// norm, `x_out = base + rms_norm(delta) * w`.
#[derive(Debug, Clone)]
pub struct FusedPostNorm {
    pipeline: Pipeline,
    shape: FusedShape,
}

impl FusedPostNorm {
    pub async fn new(ctx: &GpuContext, s: &FusedShape) -> Result<Self> {
        s.check()?;
        let source = compose(&[
            &s.wgsl_prelude(ctx, "", WORKGROUP),
            shaders::COMMON,
            shaders::FUSED_POST_NORM,
        ]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "fused_post_norm", &source, &slots).await?;
        Ok(Self {
            pipeline,
            shape: *s,
        })
    }

    /// `x`: the residual (base, delta) of the last layer; `norm_off`: its post-FFN norm.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        state: &wgpu::Buffer,
        x: &wgpu::Buffer,
        vecs: &wgpu::Buffer,
        norm_off: u32,
        x_out: &wgpu::Buffer,
    ) -> Result<FusedCall> {
        let s = &self.shape;
        check_buffer(ctx, "fused_post_norm x", x, s.residual_len())?;
        check_buffer(ctx, "fused_post_norm x_out", x_out, u64::from(s.n_embd))?;
        check_vectors(ctx, vecs, &[(norm_off, s.n_embd)])?;
        let params = PostNormParams {
            eps: s.eps,
            pf_off: norm_off,
            _pad: [0; 2],
        };
        Ok(FusedCall {
            bound: self.pipeline.bind(ctx, &params, &[state, x, vecs, x_out])?,
            groups: [1, 1, 1],
        })
    }
}
