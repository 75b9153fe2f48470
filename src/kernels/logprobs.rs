//! Log-probabilities on the GPU after each step's choice (`logprob_slices`, `logprob_choose`;
//! what they compute: `sampling::logprobs`): two dispatches, recorded only for generations that
//! ask for them, writing one row per position that the host reads back with the tokens.

use super::checks::require;
use super::pipeline::{compose, Pipeline, Slot};
use super::sample::{SampleCall, SELECT_SLICE};
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::model::activations::storage;
use crate::sampling::logprobs::{LOGPROB_STRIDE, TOP_LOGPROBS_MAX};
use crate::shaders;

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct SliceParams {
    n_vocab: u32,
    _pad: [u32; 3],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ChooseParams {
    n_lists: u32,
    top_n: u32,
    n_ctx: u32,
    _pad: u32,
}

/// The two log-probability kernels, compiled on the first generation that asks for them.
#[derive(Debug, Clone)]
pub struct LogprobKernels {
    slices: Pipeline,
    choose: Pipeline,
}

/// The kernels bound for one generation, with the buffers they write (released with it).
#[derive(Debug, Clone)]
pub struct LogprobCalls {
    slices: SampleCall,
    choose: SampleCall,
    /// `[n_ctx, LOGPROB_STRIDE]` u32: each position's row (`sampling::logprobs`).
    pub rows: wgpu::Buffer,
    scratch: [wgpu::Buffer; 2],
}

impl LogprobKernels {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let consts = format!(
            "const TOP_MAX: u32 = {TOP_LOGPROBS_MAX}u;\nconst LOGPROB_STRIDE: u32 = {LOGPROB_STRIDE}u;\n"
        );
        let common = [
            consts.as_str(),
            shaders::COMMON,
            shaders::SAMPLER_PARAMS,
            shaders::SAMPLE_TOPK,
        ];
        let slices = Pipeline::new(
            ctx,
            "logprob_slices",
            &compose(&[&common[..], &[shaders::LOGPROB_SLICES]].concat()),
            &[
                Slot::Uniform,
                Slot::Read,
                Slot::Read,
                Slot::ReadWrite,
                Slot::ReadWrite,
            ],
        )
        .await?;
        let choose = Pipeline::new(
            ctx,
            "logprob_choose",
            &compose(&[&common[..], &[shaders::LOGPROB_CHOOSE]].concat()),
            &[
                Slot::Uniform,
                Slot::Read,
                Slot::Read,
                Slot::Read,
                Slot::Read,
                Slot::Read,
                Slot::ReadWrite,
            ],
        )
        .await?;
        Ok(Self { slices, choose })
    }

    /// Binds both for one generation reporting `top_n` (at most `TOP_LOGPROBS_MAX`)
    /// alternatives per token, over the model's `logits` and `tokens` buffers.
    pub fn bind(
        &self,
        ctx: &GpuContext,
        n_vocab: u32,
        top_n: u32,
        state: &wgpu::Buffer,
        logits: &wgpu::Buffer,
        tokens: &wgpu::Buffer,
    ) -> Result<LogprobCalls> {
        require(
            top_n <= TOP_LOGPROBS_MAX,
            "logprobs: at most 20 alternatives per token",
        )?;
        let n_lists = n_vocab.div_ceil(SELECT_SLICE);
        let n_ctx = (tokens.size() / 4) as u32;
        let lists = storage(
            ctx,
            "logprob lists",
            u64::from(n_lists) * u64::from(TOP_LOGPROBS_MAX) * 8,
        );
        let ms = storage(ctx, "logprob slice sums", u64::from(n_lists) * 8);
        let rows = storage(
            ctx,
            "logprob rows",
            u64::from(n_ctx) * u64::from(LOGPROB_STRIDE) * 4,
        );
        // Nothing made here outlives a failed bind.
        let release = |made: &[&wgpu::Buffer]| made.iter().for_each(|b| ctx.release(b));
        let slices = match self.slices.bind(
            ctx,
            &SliceParams {
                n_vocab,
                _pad: [0; 3],
            },
            &[state, logits, &lists, &ms],
        ) {
            Ok(bound) => SampleCall::new(bound, [n_lists, 1, 1]),
            Err(e) => {
                release(&[&lists, &ms, &rows]);
                return Err(e);
            }
        };
        let choose = match self.choose.bind(
            ctx,
            &ChooseParams {
                n_lists,
                top_n,
                n_ctx,
                _pad: 0,
            },
            &[state, logits, &lists, &ms, tokens, &rows],
        ) {
            Ok(bound) => SampleCall::new(bound, [1, 1, 1]),
            Err(e) => {
                slices.release(ctx);
                release(&[&lists, &ms, &rows]);
                return Err(e);
            }
        };
        Ok(LogprobCalls {
            slices,
            choose,
            rows,
            scratch: [lists, ms],
        })
    }
}

impl LogprobCalls {
    /// After the step's choice.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.slices.record(pass);
        self.choose.record(pass);
    }

    /// Destroys what [`LogprobKernels::bind`] made.
    pub fn release(&self, ctx: &GpuContext) {
        self.slices.release(ctx);
        self.choose.release(ctx);
        ctx.release(&self.rows);
        for b in &self.scratch {
            ctx.release(b);
        }
    }
}
