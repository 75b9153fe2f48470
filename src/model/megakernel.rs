//! The megakernel strategy's GPU side (issue 9): a whole generation in one dispatch of one
//! workgroup (`kernels::megakernel`, `shaders/megakernel.wgsl`).
//!
//! The kernel reads every weight from ONE buffer (WebGPU allows 8 storage bindings per
//! kernel; a model has 7 matrices per layer), so on first use the model's weights are copied,
//! GPU to GPU, into an arena behind a tensor table. With its own f32 KV cache and scratch this
//! costs a second copy of the weights in GPU memory while the model lives; `MemoryUse`'s
//! `megakernel` field reports it. Llama-family blocks only (RMSNorm, RoPE, grouped-query
//! attention, SwiGLU, tied or separate head, every weight format the engine supports); the
//! other architectures' switches get a typed error and run with `fused` or `unfused`.

use super::activations::{storage, Activations, SamplerBuffers};
use super::gpu_weights::ModelWeights;
use crate::error::{FuselmError, Result};
use crate::gguf::{FfnActivation, ModelConfig, RopeStyle};
use crate::gpu::GpuContext;
use crate::gpu::StagedRead;
use crate::kernels::constraint::ConstraintTable;
use crate::kernels::megakernel::{
    check_grid, format_id, MegaCall, MegaParams, MegaShape, Megakernel, TABLE_LAYERS, TABLE_STRIDE,
};
use crate::kernels::weights::WeightFormat;
use crate::kernels::GpuWeight;

/// The megakernel bound to its arena, KV cache and scratch.
pub struct MegaModel {
    pub call: MegaCall,
    pub params: wgpu::Buffer,
    pub shape: MegaShape,
    arena: wgpu::Buffer,
    kv: wgpu::Buffer,
    scratch: wgpu::Buffer,
    /// The grid version's barrier counter and flags (zeroed before each of its dispatches).
    pub gsync: wgpu::Buffer,
    formats: Vec<WeightFormat>,
    /// The portable kernel (bound again for constrained generations: `constrained_call`).
    kernel: Megakernel,
    /// The grid version, built on first use for one workgroup count; it shares the arena and
    /// the KV cache (same layout), with a scratch of its own.
    grid: Option<GridKernel>,
}

/// The grid megakernel compiled for `workgroups` workgroups.
struct GridKernel {
    workgroups: u32,
    kernel: Megakernel,
    call: MegaCall,
    scratch: wgpu::Buffer,
}

impl Drop for GridKernel {
    fn drop(&mut self) {
        self.scratch.destroy();
    }
}

/// The megakernel bound for one constrained generation ([`MegaModel::constrained_call`]);
/// `release` frees its scratch.
pub struct ConstrainedCall {
    pub call: MegaCall,
    scratch: wgpu::Buffer,
    /// The scratch word of the constraint's DFA state (`MegaParams::ctab`).
    pub ctab: u32,
}

impl ConstrainedCall {
    pub fn release(&self, ctx: &GpuContext) {
        ctx.release(&self.scratch);
    }
}

/// Workgroups the occupancy discovery dispatches (more than any GPU keeps resident with this
/// kernel's 256 invocations each).
const DISCOVERY_WORKGROUPS: u32 = 4096;

/// The megakernel's shape for `config`, or why it cannot run this model.
pub fn mega_shape(config: &ModelConfig, n_ctx: u32) -> Result<MegaShape> {
    let c = config;
    let mut unsupported = Vec::new();
    if c.qkv_bias || c.attn_output_bias {
        unsupported.push("attention biases");
    }
    if c.qk_norm {
        unsupported.push("per-head Q/K norms");
    }
    if c.post_norms {
        unsupported.push("post-attention/FFN norms");
    }
    if c.ffn_activation != FfnActivation::Silu {
        unsupported.push("a GELU gate");
    }
    if c.embedding_scale != 1.0 {
        unsupported.push("a scaled embedding");
    }
    if c.sliding_window.is_some() {
        unsupported.push("sliding-window attention");
    }
    if c.rope_extended() {
        unsupported.push("RoPE scaling or frequency factors");
    }
    if !unsupported.is_empty() {
        return Err(FuselmError::UnsupportedModel(format!(
            "the megakernel runs llama-family blocks; architecture {} has {} (use fused or \
             unfused)",
            c.arch,
            unsupported.join(", ")
        )));
    }
    let shape = MegaShape {
        n_embd: c.n_embd,
        n_ff: c.n_ff,
        n_head: c.n_head,
        n_head_kv: c.n_head_kv,
        head_dim: c.head_dim,
        n_rot: c.rope_dims,
        neox: c.rope_style == RopeStyle::NeoX,
        eps: c.rms_eps,
        n_ctx,
        n_layer: c.n_layers,
        n_vocab: c.vocab_size,
        theta_scale: c.rope_freq_base.powf(-2.0 / c.rope_dims as f32),
        att_scale: c.attention_scale,
    };
    shape.check()?;
    Ok(shape)
}

/// Where tensors go in the arena, and the copies that put them there.
struct ArenaPlan<'w> {
    table: Vec<u32>,
    /// Words used so far.
    end: u64,
    copies: Vec<(&'w wgpu::Buffer, u64, u64, u64)>, // (source, source byte, arena byte, bytes)
}

impl<'w> ArenaPlan<'w> {
    /// Places a matrix at a multiple of its row's words; returns (format id, first row).
    fn matrix(&mut self, w: &'w GpuWeight) -> Result<[u32; 2]> {
        let row_bytes = w.format.gpu_row_bytes(u64::from(w.k));
        if row_bytes % 4 != 0 || w.k % 8 != 0 {
            return Err(FuselmError::UnsupportedModel(format!(
                "the megakernel needs whole-word rows with k a multiple of 8 ({} rows of {} \
                 values)",
                w.format.ggml(),
                w.k
            )));
        }
        let row_words = row_bytes / 4;
        let start = self.end.div_ceil(row_words) * row_words;
        for c in w.chunks() {
            let bytes = u64::from(c.rows) * row_bytes;
            self.copies.push((
                &c.view.buffer,
                c.view.offset,
                start * 4 + u64::from(c.row0) * row_bytes,
                bytes,
            ));
        }
        self.end = start + u64::from(w.n) * row_words;
        let first = u32::try_from(start / row_words).map_err(|_| too_big(self.end * 4, 0))?;
        Ok([format_id(w.format), first])
    }

    /// Places an f32 vector; returns its word offset.
    fn vector(&mut self, b: &'w wgpu::Buffer) -> Result<u32> {
        let start = self.end.div_ceil(4) * 4;
        self.copies.push((b, 0, start * 4, b.size()));
        self.end = start + b.size().div_ceil(4);
        u32::try_from(start).map_err(|_| too_big(self.end * 4, 0))
    }
}

fn too_big(needed: u64, available: u64) -> FuselmError {
    FuselmError::LimitExceeded {
        limit: "maxStorageBufferBindingSize (the megakernel's weight arena)",
        needed,
        available,
    }
}

impl Drop for MegaModel {
    /// Frees the arena (a copy of the weights) at once: in a browser a dropped buffer would
    /// hold its memory until garbage collection.
    fn drop(&mut self) {
        self.arena.destroy();
        self.kv.destroy();
        self.scratch.destroy();
    }
}

impl MegaModel {
    /// Compiles the megakernel for this model and copies its weights into the arena.
    pub async fn build(
        ctx: &GpuContext,
        config: &ModelConfig,
        weights: &ModelWeights,
        acts: &Activations,
        sampler: &SamplerBuffers,
    ) -> Result<Self> {
        let shape = mega_shape(config, acts.n_ctx)?;
        let limits = ctx.device.limits();
        let max_binding = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);

        let table_words = TABLE_LAYERS + TABLE_STRIDE * config.n_layers;
        let mut plan = ArenaPlan {
            table: vec![0; table_words as usize],
            end: u64::from(table_words),
            copies: Vec::new(),
        };
        let embd = plan.matrix(&weights.tok_embd)?;
        plan.table[0..2].copy_from_slice(&embd);
        let head = match &weights.output {
            Some(out) => plan.matrix(out)?,
            None => embd,
        };
        plan.table[2..4].copy_from_slice(&head);
        plan.table[4] = plan.vector(&weights.output_norm)?;
        let mut formats = vec![weights.tok_embd.format, weights.head().format];
        for (l, w) in weights.layers.iter().enumerate() {
            let t = (TABLE_LAYERS + TABLE_STRIDE * l as u32) as usize;
            let mats = [&w.wq, &w.wk, &w.wv, &w.wo, &w.w_gate, &w.w_up, &w.w_down];
            for (i, m) in mats.into_iter().enumerate() {
                let e = plan.matrix(m)?;
                plan.table[t + 2 * i..t + 2 * i + 2].copy_from_slice(&e);
                formats.push(m.format);
            }
            plan.table[t + 14] = plan.vector(&w.attn_norm)?;
            plan.table[t + 15] = plan.vector(&w.ffn_norm)?;
        }
        let arena_bytes = plan.end * 4;
        if arena_bytes > max_binding {
            return Err(too_big(arena_bytes, max_binding));
        }
        let kv_bytes = shape.kv_len() * 4;
        if kv_bytes > max_binding {
            return Err(FuselmError::LimitExceeded {
                limit: "maxStorageBufferBindingSize (the megakernel's KV cache)",
                needed: kv_bytes,
                available: max_binding,
            });
        }
        let kernel = Megakernel::new(ctx, shape, &formats, None).await?;

        let arena = storage(ctx, "megakernel arena", arena_bytes);
        ctx.queue
            .write_buffer(&arena, 0, bytemuck::cast_slice(&plan.table));
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("megakernel arena"),
            });
        for (src, from, to, bytes) in &plan.copies {
            enc.copy_buffer_to_buffer(src, *from, &arena, *to, *bytes);
        }
        ctx.queue.submit([enc.finish()]);

        let kv = storage(ctx, "megakernel kv cache", kv_bytes);
        let scratch = storage(ctx, "megakernel scratch", shape.scratch(None).words * 4);
        let gsync = storage(ctx, "megakernel grid sync", 16);
        let params = ctx.create_buffer(&wgpu::BufferDescriptor {
            label: Some("megakernel params"),
            size: std::mem::size_of::<MegaParams>() as u64,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let call = kernel.bind(
            ctx,
            &params,
            &acts.state,
            &arena,
            &sampler.params,
            &kv,
            &scratch,
            &acts.tokens,
            &sampler.counts,
            &gsync,
        )?;
        Ok(Self {
            call,
            params,
            shape,
            arena,
            kv,
            scratch,
            gsync,
            formats,
            kernel,
            grid: None,
        })
    }

    /// Its KV cache: f32, per layer K then V, per KV head, `n_ctx` rows of `head_dim`
    /// (`kv_base` in megakernel.wgsl).
    pub fn kv(&self) -> &wgpu::Buffer {
        &self.kv
    }

    /// GPU bytes of the arena, KV cache and scratch (the grid version's too, once built).
    pub fn bytes(&self) -> u64 {
        self.arena.size()
            + self.kv.size()
            + self.scratch.size()
            + self.grid.as_ref().map_or(0, |g| g.scratch.size())
    }

    /// `kernel` bound to this model's arena, KV cache and parameters, the model's activations
    /// and sampler, and `scratch`.
    fn bind(
        &self,
        kernel: &Megakernel,
        ctx: &GpuContext,
        acts: &Activations,
        sampler: &SamplerBuffers,
        scratch: &wgpu::Buffer,
    ) -> Result<MegaCall> {
        kernel.bind(
            ctx,
            &self.params,
            &acts.state,
            &self.arena,
            &sampler.params,
            &self.kv,
            scratch,
            &acts.tokens,
            &sampler.counts,
            &self.gsync,
        )
    }

    /// The grid version for `workgroups` workgroups: compiled and bound on first use (or when
    /// the count changes).
    pub async fn grid_call(
        &mut self,
        ctx: &GpuContext,
        acts: &Activations,
        sampler: &SamplerBuffers,
        workgroups: u32,
    ) -> Result<&MegaCall> {
        check_grid(ctx, &self.shape, workgroups)?;
        if self.grid.as_ref().map(|g| g.workgroups) != Some(workgroups) {
            self.grid = None;
            let kernel = Megakernel::new(ctx, self.shape, &self.formats, Some(workgroups)).await?;
            let words = self.shape.scratch(Some(workgroups)).words;
            let scratch = storage(ctx, "megakernel grid scratch", words * 4);
            let call = self.bind(&kernel, ctx, acts, sampler, &scratch)?;
            self.grid = Some(GridKernel {
                workgroups,
                kernel,
                call,
                scratch,
            });
        }
        Ok(&self.grid.as_ref().expect("built above").call)
    }

    /// A call for one constrained generation (the portable kernel, or the grid version when
    /// `grid` and it is built): bound to a scratch of its own that holds, after the kernel's
    /// words, the constraint's DFA state (word `ctab`, the start state) and then its table.
    pub fn constrained_call(
        &self,
        ctx: &GpuContext,
        acts: &Activations,
        sampler: &SamplerBuffers,
        grid: bool,
        table: &ConstraintTable,
        start: u32,
    ) -> Result<ConstrainedCall> {
        let (kernel, workgroups) = match (&self.grid, grid) {
            (Some(g), true) => (&g.kernel, Some(g.workgroups)),
            (None, true) => {
                return Err(FuselmError::Gpu("the grid megakernel is not built".into()))
            }
            (_, false) => (&self.kernel, None),
        };
        let base = self.shape.scratch(workgroups).words;
        let bytes = (base + 1) * 4 + table.buffer.size();
        let limits = ctx.device.limits();
        let available = limits
            .max_storage_buffer_binding_size
            .min(limits.max_buffer_size);
        let ctab = u32::try_from(base).ok().filter(|_| bytes <= available);
        let Some(ctab) = ctab else {
            return Err(FuselmError::LimitExceeded {
                limit: "maxStorageBufferBindingSize (the megakernel's scratch with the constraint's table)",
                needed: bytes,
                available,
            });
        };
        let scratch = storage(ctx, "megakernel constrained scratch", bytes);
        ctx.queue
            .write_buffer(&scratch, base * 4, bytemuck::bytes_of(&start));
        let mut enc = ctx
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                label: Some("megakernel constraint table"),
            });
        enc.copy_buffer_to_buffer(
            &table.buffer,
            0,
            &scratch,
            (base + 1) * 4,
            table.buffer.size(),
        );
        ctx.queue.submit([enc.finish()]);
        match self.bind(kernel, ctx, acts, sampler, &scratch) {
            Ok(call) => Ok(ConstrainedCall {
                call,
                scratch,
                ctab,
            }),
            Err(e) => {
                ctx.release(&scratch);
                Err(e)
            }
        }
    }

    /// The grid version's call, if built.
    pub fn built_grid(&self) -> Option<(u32, &MegaCall)> {
        self.grid.as_ref().map(|g| (g.workgroups, &g.call))
    }

    /// How many workgroups of the grid megakernel this adapter keeps resident at once: the
    /// occupancy discovery (`discover` in the shader) on the grid pipeline itself, the least
    /// of three runs. Rewrites `params` (each generation writes its own).
    pub async fn discover_workgroups(
        &mut self,
        ctx: &GpuContext,
        acts: &Activations,
        sampler: &SamplerBuffers,
    ) -> Result<u32> {
        let workgroups = match &self.grid {
            Some(g) => g.workgroups,
            None => 1,
        };
        self.grid_call(ctx, acts, sampler, workgroups).await?;
        let call = &self.grid.as_ref().expect("built above").call;
        let params = MegaParams {
            n_prompt: 1,
            end: 1,
            steps: 0,
            n_lists: 0,
            ctab: 0,
            _pad: [0; 3],
        };
        ctx.queue
            .write_buffer(&self.params, 0, bytemuck::bytes_of(&params));
        let mut least = u32::MAX;
        for _ in 0..3 {
            let mut enc = ctx
                .device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("megakernel grid discovery"),
                });
            enc.clear_buffer(&self.gsync, 0, None);
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                call.record_discovery(&mut pass, DISCOVERY_WORKGROUPS);
            }
            let read = StagedRead::copy(&ctx.device, &mut enc, &self.gsync, 0, 16);
            let index = ctx.queue.submit([enc.finish()]);
            let words: Vec<u32> =
                bytemuck::pod_collect_to_vec(&read.submitted(index).read(&ctx.device).await?);
            least = least.min(words[3]);
        }
        if least == 0 {
            return Err(FuselmError::Gpu(
                "the grid megakernel's occupancy discovery found no resident workgroup".into(),
            ));
        }
        Ok(least)
    }
}
