//! A compiled constraint on the GPU: one read-only table (`ConstraintTable`) and the kernel
//! that turns its current state into the sampler's mask (`ConstraintMask`,
//! constraint_mask.wgsl). sample_choose.wgsl advances the state by each chosen token.
//!
//! The table, in u32 words: a header of 16 words, then its sections (offsets in words).
//!
//! | word | meaning |
//! |---|---|
//! | 0 | DFA states (0 is dead) |
//! | 1 | byte classes |
//! | 2 | mask words per state (`ceil(n_vocab / 32)`) |
//! | 3 | n_vocab |
//! | 4 | offset of `classes`: 256 words, byte → class |
//! | 5 | offset of `trans`: `[state * classes + class]` → state |
//! | 6 | offset of `mask_of_state`: state → mask index |
//! | 7 | offset of `masks`: `[mask * words + w]` |
//! | 8 | offset of `token_starts`: n_vocab + 1 byte offsets |
//! | 9 | offset of `token_bytes`: the tokens' bytes, 4 per word, little-endian |
//! | 10 | the start state |

use super::checks::check_buffer;
use super::dispatch::{grid, max_groups};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use crate::constraint::TokenAutomaton;
use crate::error::Result;
use crate::gpu::GpuContext;
use crate::shaders;

const HEADER_WORDS: usize = 16;

/// How many words [`table_words`] gives for `a`, without building them.
pub fn table_len(a: &TokenAutomaton) -> usize {
    let d = &a.dfa;
    HEADER_WORDS
        + 256
        + d.trans.len()
        + a.mask_of_state.len()
        + a.masks.len()
        + a.vocab.offsets.len()
        + a.vocab.bytes.len().div_ceil(4)
}

/// The table's words for `a` (layout in the module docs).
pub fn table_words(a: &TokenAutomaton) -> Vec<u32> {
    let d = &a.dfa;
    let v = &a.vocab;
    let mut t = vec![0u32; HEADER_WORDS];
    t[0] = d.n_states();
    t[1] = d.n_classes;
    t[2] = a.words();
    t[3] = v.n_vocab;
    t[10] = d.start;
    let section = |t: &mut Vec<u32>, slot: usize, words: &mut dyn Iterator<Item = u32>| {
        t[slot] = t.len() as u32;
        t.extend(words);
    };
    section(&mut t, 4, &mut d.classes.iter().map(|&c| u32::from(c)));
    section(&mut t, 5, &mut d.trans.iter().copied());
    section(&mut t, 6, &mut a.mask_of_state.iter().copied());
    section(&mut t, 7, &mut a.masks.iter().copied());
    section(&mut t, 8, &mut v.offsets.iter().copied());
    section(
        &mut t,
        9,
        &mut v
            .bytes
            .chunks(4)
            .map(|c| c.iter().rev().fold(0u32, |w, &b| (w << 8) | u32::from(b))),
    );
    debug_assert_eq!(t.len(), table_len(a));
    t
}

/// A constraint uploaded: its table and start state.
#[derive(Debug)]
pub struct ConstraintTable {
    pub buffer: wgpu::Buffer,
    pub start: u32,
    pub words: u32,
    pub n_vocab: u32,
}

impl ConstraintTable {
    /// Uploads `a`'s table (an error when it exceeds a storage binding).
    pub fn upload(ctx: &GpuContext, a: &TokenAutomaton) -> Result<Self> {
        let words = table_words(a);
        let bytes = words.len() as u64 * 4;
        let limit = ctx.device.limits().max_storage_buffer_binding_size;
        if bytes > limit {
            return Err(crate::FuselmError::LimitExceeded {
                limit: "maxStorageBufferBindingSize (constraint tables)",
                needed: bytes,
                available: limit,
            });
        }
        let buffer = ctx.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("fuselm constraint table"),
            contents: bytemuck::cast_slice(&words),
            // COPY_SRC: the megakernels copy it into their scratch.
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        });
        Ok(Self {
            buffer,
            start: a.start(),
            words: a.words(),
            n_vocab: a.vocab.n_vocab,
        })
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct MaskParams {
    words: u32,
    n_vocab: u32,
    _pad: [u32; 2],
}

/// Marks the ids the constraint disallows in `counts` (constraint_mask.wgsl).
#[derive(Debug, Clone)]
pub struct ConstraintMask {
    pipeline: Pipeline,
}

/// [`ConstraintMask`] bound to a model's buffers and a table.
#[derive(Debug, Clone)]
pub struct ConstraintMaskCall {
    bound: Bound,
    groups: [u32; 3],
}

impl ConstraintMaskCall {
    /// Destroys the buffers made for this call (bound for one generation).
    pub fn release(&self, ctx: &GpuContext) {
        self.bound.release(ctx);
    }
}

impl ConstraintMask {
    pub async fn new(ctx: &GpuContext) -> Result<Self> {
        let source = compose(&[
            shaders::COMMON,
            shaders::SAMPLER_PARAMS,
            shaders::CONSTRAINT_MASK,
        ]);
        let slots = [Slot::Uniform, Slot::Read, Slot::Read, Slot::ReadWrite];
        let pipeline = Pipeline::new(ctx, "constraint_mask", &source, &slots).await?;
        Ok(Self { pipeline })
    }

    pub fn bind(
        &self,
        ctx: &GpuContext,
        state: &wgpu::Buffer,
        table: &ConstraintTable,
        counts: &wgpu::Buffer,
    ) -> Result<ConstraintMaskCall> {
        check_buffer(
            ctx,
            "constraint_mask counts",
            counts,
            u64::from(table.n_vocab),
        )?;
        let params = MaskParams {
            words: table.words,
            n_vocab: table.n_vocab,
            _pad: [0; 2],
        };
        let (gx, gy) = grid(u64::from(table.words.div_ceil(256)), max_groups(ctx))?;
        Ok(ConstraintMaskCall {
            bound: self
                .pipeline
                .bind(ctx, &params, &[state, &table.buffer, counts])?,
            groups: [gx, gy, 1],
        })
    }
}

impl ConstraintMaskCall {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.bound.dispatch(pass, self.groups);
    }
}
