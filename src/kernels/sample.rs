//! The end of a fused step on the GPU: output head with penalties, candidate selection, and
//! the choice of the next token with its bookkeeping (`head_logits`, `sample_select`,
//! `sample_choose`). Greedy decoding records head + choose (2 dispatches); sampling adds
//! select (3). The settings live in a storage buffer holding `sampling::SamplerParams`.

use super::checks::{check_buffer, check_bytes, require};
use super::dispatch::{grid, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use super::weights::{GpuWeight, WeightFormat};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

/// Vocabulary rows per head_logits workgroup (4 sets of 8 rows × 32 lanes).
pub const HEAD_ROWS_PER_WORKGROUP: u32 = 32;
/// Logits per sample_select workgroup (8 blocks of `MAX_CANDIDATES`).
pub const SELECT_SLICE: u32 = 1024;

/// Workgroups (= per-workgroup best slots) head_logits uses for a head weight.
pub fn head_groups(w: &GpuWeight) -> u32 {
    w.chunks()
        .iter()
        .map(|c| c.rows.div_ceil(HEAD_ROWS_PER_WORKGROUP))
        .sum()
}

/// Candidate lists sample_select writes for a vocabulary.
pub fn select_lists(n_vocab: u32) -> u32 {
    n_vocab.div_ceil(SELECT_SLICE)
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct HeadParams {
    n_rows: u32,
    row0: u32,
    best0: u32,
    eps: f32,
}
const _: () = assert!(std::mem::size_of::<HeadParams>() == 16);

/// Final norm + output head + penalties → `logits`, per-workgroup bests → `best`.
#[derive(Debug, Clone)]
pub struct HeadLogits {
    pipeline: Pipeline,
    n_embd: u32,
}

/// [`HeadLogits`] bound: one dispatch per head chunk.
#[derive(Debug, Clone)]
pub struct HeadLogitsCall {
    chunks: Vec<(Bound, [u32; 3])>,
}

impl HeadLogits {
    /// `n_embd`: the head's input width (a multiple of 8, at most the fused kernels' limit).
    pub async fn new(ctx: &GpuContext, format: WeightFormat, n_embd: u32) -> Result<Self> {
        require(
            n_embd % 8 == 0 && n_embd <= super::fused_layer::MAX_EMBD,
            "head_logits: n_embd must be a multiple of 8 within the fused kernels' limit",
        )?;
        let sg = ctx.subgroups32();
        // 32 lanes per row: the head is throughput-bound (~1,500 workgroups), not
        // latency-bound like the per-layer kernels. `KernelTuning::head_lanes` overrides it.
        let lanes = ctx.tuning().head_lanes.unwrap_or(32);
        let consts = format!(
            "{}const N_EMBD: u32 = {n_embd}u;\nconst LANES: u32 = {lanes}u;\n",
            if sg { ctx.subgroups_enable() } else { "" }
        );
        let source = compose(&[
            &consts,
            if sg {
                shaders::REDUCE_SUBGROUP
            } else {
                shaders::REDUCE_SHARED
            },
            shaders::COMMON,
            shaders::SAMPLER_PARAMS,
            format.decoder(),
            shaders::HEAD_LOGITS,
        ]);
        let mut slots = vec![Slot::Uniform];
        slots.extend([Slot::Read; 6]);
        slots.extend([Slot::ReadWrite; 2]);
        let pipeline = Pipeline::new(ctx, "head_logits", &source, &slots).await?;
        Ok(Self { pipeline, n_embd })
    }

    /// `x`: the residual stream; the kernel reads row `state.n_tokens - 1` (the last token).
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        eps: f32,
        state: &wgpu::Buffer,
        x: &wgpu::Buffer,
        norm_w: &wgpu::Buffer,
        head: &GpuWeight,
        counts: &wgpu::Buffer,
        sampler: &wgpu::Buffer,
        logits: &wgpu::Buffer,
        best: &wgpu::Buffer,
    ) -> Result<HeadLogitsCall> {
        require(
            head.k == self.n_embd,
            "head_logits: the head's rows differ from the kernel's n_embd",
        )?;
        check_buffer(ctx, "head_logits norm", norm_w, u64::from(head.k))?;
        check_buffer(ctx, "head_logits logits", logits, u64::from(head.n))?;
        check_buffer(ctx, "head_logits counts", counts, u64::from(head.n))?;
        check_bytes(
            ctx,
            "head_logits best",
            best,
            u64::from(head_groups(head)) * 8,
        )?;
        let mut best0 = 0;
        let chunks = head
            .chunks()
            .iter()
            .map(|c| {
                let params = HeadParams {
                    n_rows: c.rows,
                    row0: c.row0,
                    best0,
                    eps,
                };
                let groups = c.rows.div_ceil(HEAD_ROWS_PER_WORKGROUP);
                best0 += groups;
                let (gx, gy) = grid(u64::from(groups), max_groups(ctx))?;
                Ok((
                    self.pipeline.bind(
                        ctx,
                        &params,
                        &[
                            state.into(),
                            x.into(),
                            norm_w.into(),
                            c.binding(),
                            counts.into(),
                            sampler.into(),
                            logits.into(),
                            best.into(),
                        ],
                    )?,
                    [gx, gy, 1],
                ))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(HeadLogitsCall { chunks })
    }
}

impl HeadLogitsCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        for (bound, groups) in &self.chunks {
            bound.dispatch(pass, *groups);
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct SelectParams {
    n_vocab: u32,
    _pad: [u32; 3],
}

/// Per-slice top-`MAX_CANDIDATES` of the tempered logits → `cand`.
#[derive(Debug, Clone)]
pub struct SampleSelect {
    pipeline: Pipeline,
}

/// A bound single-grid dispatch of the sampler.
#[derive(Debug, Clone)]
pub struct SampleCall {
    bound: Bound,
    groups: [u32; 3],
}

impl SampleCall {
    pub(crate) fn new(bound: Bound, groups: [u32; 3]) -> Self {
        Self { bound, groups }
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.dispatch(pass, self.groups);
    }

    /// Destroys the buffers made for this call (a call bound for one generation).
    pub fn release(&self, ctx: &GpuContext) {
        self.bound.release(ctx);
    }
}

impl SampleSelect {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let source = compose(&[
            shaders::COMMON,
            shaders::SAMPLER_PARAMS,
            shaders::SAMPLE_TOPK,
            shaders::SAMPLE_SELECT,
        ]);
        let slots = [
            Slot::Uniform,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
        ];
        let pipeline = Pipeline::new(ctx, "sample_select", &source, &slots).await?;
        Ok(Self { pipeline })
    }

    pub fn bind(
        &self,
        ctx: &GpuContext,
        n_vocab: u32,
        state: &wgpu::Buffer,
        sampler: &wgpu::Buffer,
        logits: &wgpu::Buffer,
        cand: &wgpu::Buffer,
    ) -> Result<SampleCall> {
        let lists = select_lists(n_vocab);
        check_bytes(
            ctx,
            "sample_select cand",
            cand,
            u64::from(lists) * u64::from(crate::sampling::MAX_CANDIDATES) * 8,
        )?;
        let params = SelectParams {
            n_vocab,
            _pad: [0; 3],
        };
        let (gx, gy) = grid(u64::from(lists), max_groups(ctx))?;
        require(
            gy == 1,
            "sample_select: vocabulary too large for one grid row",
        )?;
        Ok(SampleCall {
            bound: self
                .pipeline
                .bind(ctx, &params, &[state, sampler, logits, cand])?,
            groups: [gx, 1, 1],
        })
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ChooseParams {
    n_best: u32,
    n_lists: u32,
    n_ctx: u32,
    _pad: u32,
}

/// Chooses the next token (greedy or sampled), appends it to `tokens`, moves the penalty
/// counts and `state` on, and raises `state.done` at a stop id.
#[derive(Debug, Clone)]
pub struct SampleChoose {
    pipeline: Pipeline,
}

impl SampleChoose {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let source = compose(&[
            shaders::COMMON,
            shaders::SAMPLER_PARAMS,
            shaders::SAMPLE_TOPK,
            shaders::SAMPLE_DRAW,
            shaders::SAMPLE_CHOOSE,
        ]);
        let slots = [
            Slot::Uniform,
            Slot::ReadWrite,
            Slot::Read,
            Slot::Read,
            Slot::Read,
            Slot::ReadWrite,
            Slot::ReadWrite,
            Slot::Read,
        ];
        let pipeline = Pipeline::new(ctx, "sample_choose", &source, &slots).await?;
        Ok(Self { pipeline })
    }

    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        n_best: u32,
        n_vocab: u32,
        state: &wgpu::Buffer,
        sampler: &wgpu::Buffer,
        best: &wgpu::Buffer,
        cand: &wgpu::Buffer,
        tokens: &wgpu::Buffer,
        counts: &wgpu::Buffer,
        constraint: &wgpu::Buffer,
    ) -> Result<SampleCall> {
        let params = ChooseParams {
            n_best,
            n_lists: select_lists(n_vocab),
            n_ctx: (tokens.size() / 4) as u32,
            _pad: 0,
        };
        Ok(SampleCall {
            bound: self.pipeline.bind(
                ctx,
                &params,
                &[state, sampler, best, cand, tokens, counts, constraint],
            )?,
            groups: [1, 1, 1],
        })
    }
}
