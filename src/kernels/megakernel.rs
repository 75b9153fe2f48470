//! The portable megakernel (`shaders/megakernel.wgsl`): a whole generation in one workgroup
//! that loops in the shader. This type owns its contract: the arena's tensor table, the
//! scratch layout, the constants it is compiled with and the workgroup memory it needs.
//!
//! Arena layout (u32 words): the table, then every tensor. Table words 0–1: token embedding
//! (format id, first global row); 2–3: output head (the embedding again when tied); 4: the
//! output norm's word offset; from [`TABLE_LAYERS`], [`TABLE_STRIDE`] words per layer: Wq, Wk,
//! Wv, Wo, W_gate, W_up, W_down as (format id, first global row) pairs, then the attention
//! norm's and the FFN norm's word offsets. A matrix starts at a multiple of its row's words,
//! so its "first global row" is `offset / row_words` and the format's decoder, called with
//! `first + r`, reads row r. The format id is the format's index in [`WeightFormat::ALL`].

use super::checks::{check_buffer, require};
use super::pipeline::{compose, Bound, Pipeline, Slot};
use super::weights::WeightFormat;
use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;
use crate::sampling::MAX_CANDIDATES;
use crate::shaders;

/// Prompt positions one megakernel dispatch ingests at most (`PROMPT_POSITIONS` in
/// megakernel.wgsl): the host asks whether to go on between dispatches, so this bounds how long
/// an abort waits during a long prompt (at 128, 1.8 s on SwiftShader in the SDK test's 480-token
/// prompt; at 32, 60 ms), and the host predicts each dispatch's tokens from it.
pub const MEGAKERNEL_PROMPT_POSITIONS: u32 = 32;
/// Invocations of the megakernel's one workgroup.
pub const WORKGROUP: u32 = 256;
/// First word of the per-layer table entries.
pub const TABLE_LAYERS: u32 = 8;
/// Table words per layer.
pub const TABLE_STRIDE: u32 = 16;
/// Largest head_dim (one attention output element per invocation).
pub const MAX_HEAD_DIM: u32 = 256;

/// Workgroup memory of everything but the shared vectors and position c's K and V: the
/// reductions (256 vec4 and 256 words), the top-k keys (2 × 1024), the candidates' weights
/// (128), three flags and the grid version's head query (one word in the portable version).
const FIXED_WORKGROUP_BYTES: u64 = 4 * (4 * 256 + 256 + 2 * 1024 + 128 + 3 + 1);
/// Polls of a grid barrier's spin before it gives up and sets the error flag (~0.1–0.5 s on a
/// GPU, where one poll is an L2 atomic round trip).
pub const SPIN_MAX: u32 = 1 << 19;
/// Polls the occupancy discovery's first workgroup waits for the others to arrive (ms).
pub const DISCOVER_POLLS: u32 = 1 << 14;
/// Lanes per matrix row in the grid version (one subgroup of 32 where subgroups are 32 wide).
pub const GRID_LANES: u32 = 32;

/// Mirrors `Params` in `shaders/megakernel.wgsl`.
#[repr(C)]
#[derive(Debug, Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MegaParams {
    pub n_prompt: u32,
    pub end: u32,
    pub steps: u32,
    pub n_lists: u32,
    /// A constrained generation: the scratch word holding the constraint's DFA state, its
    /// table (`kernels::constraint`'s layout) in the words after it; 0: unconstrained.
    pub ctab: u32,
    pub _pad: [u32; 3],
}
const _: () = assert!(std::mem::size_of::<MegaParams>() == 32);

/// What the megakernel is compiled for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MegaShape {
    pub n_embd: u32,
    pub n_ff: u32,
    pub n_head: u32,
    pub n_head_kv: u32,
    pub head_dim: u32,
    pub n_rot: u32,
    pub neox: bool,
    pub eps: f32,
    pub n_ctx: u32,
    pub n_layer: u32,
    pub n_vocab: u32,
    /// RoPE's freq_base^(-2 / n_rot).
    pub theta_scale: f32,
    /// Attention score scale.
    pub att_scale: f32,
}

/// Where each vector lives in the scratch buffer (words).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScratchLayout {
    pub res: u32,
    pub vin: u32,
    pub q: u32,
    pub att: u32,
    pub tmp: u32,
    pub gate: u32,
    pub up: u32,
    pub scores: u32,
    pub logits: u32,
    pub cand: u32,
    /// Grid version: Wo's and down's outputs (the next layer's QKV writes `tmp` meanwhile).
    pub out: u32,
    /// Grid version: each workgroup's best logit (value bits, id).
    pub part: u32,
    pub words: u64,
}

impl MegaShape {
    pub fn n_q(&self) -> u32 {
        self.n_head * self.head_dim
    }
    pub fn n_kv(&self) -> u32 {
        self.n_head_kv * self.head_dim
    }

    /// Candidate lists of 1024 logits (the sampler's slices).
    pub fn n_lists(&self) -> u32 {
        self.n_vocab.div_ceil(super::sample::SELECT_SLICE)
    }

    /// Floats of the KV cache: K and V of every layer, `n_ctx` rows.
    pub fn kv_len(&self) -> u64 {
        u64::from(self.n_layer) * 2 * u64::from(self.n_kv()) * u64::from(self.n_ctx)
    }

    /// Lanes per matrix row: up to 8, no more than a row of `n_embd` has 8-value units.
    pub fn lanes(&self) -> u32 {
        let units = (self.n_embd / 8).max(1);
        let mut lanes = 1;
        while lanes * 2 <= units && lanes < 8 {
            lanes *= 2;
        }
        lanes
    }

    /// Workgroup memory every version needs: the fixed arrays, position c's K and V (every
    /// KV head), from which that position's attention reads them, and the tensor table.
    pub fn fixed_workgroup_bytes(&self) -> u64 {
        FIXED_WORKGROUP_BYTES + 2 * 4 * u64::from(self.n_kv()) + 4 * u64::from(self.table_len())
    }

    /// Heads the portable version's attention handles at once: the most (a power of two, at
    /// most n_head) that leave every head at least 32 lanes and head_dim of the workgroup.
    pub fn att_heads(&self) -> u32 {
        let mut hp = 1;
        while hp * 2 <= self.n_head && WORKGROUP / (hp * 2) >= self.head_dim.max(32) {
            hp *= 2;
        }
        hp
    }

    /// Words of the arena's tensor table (copied into workgroup memory by the kernel).
    pub fn table_len(&self) -> u32 {
        TABLE_LAYERS + TABLE_STRIDE * self.n_layer
    }

    /// Whether the whole scratch fits workgroup memory next to the kernel's fixed arrays
    /// within `limit` bytes (then the residual and the matrix input live there too).
    pub fn scratch_shared(&self, limit: u32) -> bool {
        self.fixed_workgroup_bytes() + 4 * self.scratch(None).words <= u64::from(limit)
    }

    /// Else, whether the residual and the matrix-vector input fit workgroup memory.
    pub fn shared(&self, limit: u32) -> bool {
        self.fixed_workgroup_bytes() + 2 * 4 * u64::from(self.n_embd) <= u64::from(limit)
    }

    /// Floats of the grid version's matrix-vector input (in workgroup memory): the widest
    /// input, the FFN's n_ff.
    pub fn grid_vin_len(&self) -> u32 {
        self.n_embd.max(self.n_q()).max(self.n_ff)
    }

    /// Workgroup memory the grid version needs: the residual, the widest matrix input and
    /// the head vectors next to the fixed arrays.
    pub fn grid_workgroup_bytes(&self) -> u64 {
        self.fixed_workgroup_bytes()
            + 4 * u64::from(self.n_embd + self.grid_vin_len())
            + 4 * u64::from(self.head_dim)
    }

    /// The scratch layout; `grid`: the grid version's workgroup count (per-head score rows,
    /// per-workgroup partials).
    pub fn scratch(&self, grid: Option<u32>) -> ScratchLayout {
        let d = u64::from(self.n_embd);
        let f = u64::from(self.n_ff);
        let q = u64::from(self.n_q());
        let sizes = [
            d,
            d,
            q,
            q,
            q.max(d) + 2 * u64::from(self.n_kv()),
            f,
            f,
            u64::from(self.n_ctx)
                * u64::from(if grid.is_some() {
                    self.n_head
                } else {
                    self.att_heads()
                }),
            u64::from(self.n_vocab),
            2 * u64::from(self.n_lists()) * u64::from(MAX_CANDIDATES),
            if grid.is_some() { d } else { 0 },
            2 * u64::from(grid.unwrap_or(0)),
        ];
        let mut at = [0u32; 12];
        let mut end = 0u64;
        for (slot, n) in at.iter_mut().zip(sizes) {
            *slot = end as u32;
            end += n.div_ceil(4) * 4;
        }
        let [res, vin, q, att, tmp, gate, up, scores, logits, cand, out, part] = at;
        ScratchLayout {
            res,
            vin,
            q,
            att,
            tmp,
            gate,
            up,
            scores,
            logits,
            cand,
            out,
            part,
            words: end,
        }
    }

    /// What the megakernel cannot do, as a typed error.
    pub fn check(&self) -> Result<()> {
        require(
            self.n_embd % 8 == 0 && self.n_ff % 8 == 0 && self.n_q() % 8 == 0,
            "megakernel: n_embd, n_ff and n_head × head_dim must be multiples of 8",
        )?;
        require(
            self.head_dim % 4 == 0 && self.head_dim <= MAX_HEAD_DIM && self.n_rot <= self.head_dim,
            "megakernel: head_dim must be a multiple of 4 and at most 256",
        )?;
        require(
            self.n_head_kv > 0 && self.n_head % self.n_head_kv == 0,
            "megakernel: n_head must be a multiple of n_head_kv",
        )?;
        require(self.n_rot % 2 == 0, "megakernel: rope dims must be even")?;
        Ok(())
    }
}

/// The compiled megakernel.
#[derive(Debug, Clone)]
pub struct Megakernel {
    pipeline: Pipeline,
    shape: MegaShape,
    /// The grid version's workgroup count (None: the portable one-workgroup version).
    grid: Option<u32>,
}

/// [`Megakernel`] bound to its buffers: `record` dispatches it.
#[derive(Debug, Clone)]
pub struct MegaCall {
    bound: Bound,
    workgroups: u32,
}

/// The WGSL dispatch over the formats a model uses: `w8(fmt, row, u, k)`.
fn format_switch(formats: &[WeightFormat]) -> String {
    let mut out =
        String::from("fn w8(fmt: u32, row: u32, u: u32, k: u32) -> W8 {\n    switch fmt {\n");
    for f in formats {
        let id = format_id(*f);
        out += &format!("        case {id}u: {{ return wf{id}_load8(row, u, k); }}\n");
    }
    out += "        default: { return W8(); }\n    }\n}\n";
    out
}

/// A format's id in the arena table.
pub fn format_id(f: WeightFormat) -> u32 {
    WeightFormat::ALL.iter().position(|x| *x == f).unwrap_or(0) as u32
}

impl Megakernel {
    /// Compiles the megakernel for `shape` reading matrices in `formats`: the portable
    /// one-workgroup version (`grid` None) or the grid version for `grid` workgroups, which
    /// needs wgpu's native MEMORY_DECORATION_COHERENT (see the shader's header).
    pub async fn new(
        ctx: &GpuContext,
        shape: MegaShape,
        formats: &[WeightFormat],
        grid: Option<u32>,
    ) -> Result<Self> {
        shape.check()?;
        let limit = ctx.device.limits().max_compute_workgroup_storage_size;
        let grid_mode = grid.is_some();
        if let Some(g) = grid {
            check_grid(ctx, &shape, g)?;
        }
        let scratch_shared = !grid_mode && shape.scratch_shared(limit);
        let shared = grid_mode || (!scratch_shared && shape.shared(limit));
        let fixed_ok = shape.fixed_workgroup_bytes() <= u64::from(limit);
        if !fixed_ok {
            return Err(FuselmError::LimitExceeded {
                limit: "maxComputeWorkgroupStorageSize",
                needed: shape.fixed_workgroup_bytes(),
                available: u64::from(limit),
            });
        }
        let sc = shape.scratch(grid);
        let sg = ctx.subgroups32();
        let ml = if grid_mode { GRID_LANES } else { shape.lanes() };
        let consts = format!(
            "const N_EMBD: u32 = {d}u;
const N_FF: u32 = {f}u;
const N_HEAD: u32 = {h}u;
const N_HEAD_KV: u32 = {hkv}u;
const HEAD_DIM: u32 = {hd}u;
const N_ROT: u32 = {rot}u;
const NEOX: bool = {neox};
const EPS_BITS: u32 = {eps}u;
const N_CTX: u32 = {ctx_len}u;
const N_LAYER: u32 = {layers}u;
const N_VOCAB: u32 = {vocab}u;
const THETA_SCALE_BITS: u32 = {theta}u;
const ATT_SCALE_BITS: u32 = {att}u;
const ML: u32 = {ml}u;
const RPI: u32 = {rpi}u;
const GRID_MODE: bool = {grid_mode};
const PROMPT_POSITIONS: u32 = {prompt_positions}u;
const GRID: u32 = {grid_n}u;
const SPIN_MAX: u32 = {spin}u;
const DISCOVER_POLLS: u32 = {polls}u;
const SHARED: bool = {shared};
const SH_LEN: u32 = {sh_len}u;
const VIN_LEN: u32 = {vin_len}u;
const GA_LEN: u32 = {ga_len}u;
const S_OUT: u32 = {out}u;
const S_PART: u32 = {part}u;
const SCRATCH_SHARED: bool = {scratch_shared};
const S_SH_LEN: u32 = {s_sh_len}u;
const TABLE_LAYERS: u32 = {tl}u;
const TABLE_STRIDE: u32 = {ts}u;
const TABLE_LEN: u32 = {tab_len}u;
const ATT_HP: u32 = {att_hp}u;
const S_RES: u32 = {res}u;
const S_VIN: u32 = {vin}u;
const S_Q: u32 = {q}u;
const S_ATT: u32 = {att_off}u;
const S_TMP: u32 = {tmp}u;
const S_GATE: u32 = {gate}u;
const S_UP: u32 = {up}u;
const S_SC: u32 = {scores}u;
const S_LOGITS: u32 = {logits}u;
const S_CAND: u32 = {cand}u;
",
            d = shape.n_embd,
            f = shape.n_ff,
            h = shape.n_head,
            hkv = shape.n_head_kv,
            hd = shape.head_dim,
            rot = shape.n_rot,
            neox = shape.neox,
            eps = shape.eps.to_bits(),
            ctx_len = shape.n_ctx,
            layers = shape.n_layer,
            vocab = shape.n_vocab,
            theta = shape.theta_scale.to_bits(),
            att = shape.att_scale.to_bits(),
            rpi = if grid_mode { 1 } else { 4 },
            grid_mode = grid_mode,
            prompt_positions = MEGAKERNEL_PROMPT_POSITIONS,
            grid_n = grid.unwrap_or(1),
            spin = SPIN_MAX,
            polls = DISCOVER_POLLS,
            sh_len = if shared { shape.n_embd } else { 4 },
            vin_len = if grid_mode {
                shape.grid_vin_len()
            } else if shared {
                shape.n_embd
            } else {
                4
            },
            ga_len = if grid_mode { shape.head_dim } else { 1 },
            out = sc.out,
            part = sc.part,
            s_sh_len = if scratch_shared { sc.words } else { 4 },
            tl = TABLE_LAYERS,
            ts = TABLE_STRIDE,
            tab_len = shape.table_len(),
            att_hp = if grid_mode { 1 } else { shape.att_heads() },
            res = sc.res,
            vin = sc.vin,
            q = sc.q,
            att_off = sc.att,
            tmp = sc.tmp,
            gate = sc.gate,
            up = sc.up,
            scores = sc.scores,
            logits = sc.logits,
            cand = sc.cand,
        );
        let mut formats: Vec<WeightFormat> = formats.to_vec();
        formats.sort_by_key(|f| format_id(*f));
        formats.dedup();
        let decoders: Vec<String> = formats
            .iter()
            .map(|f| f.decoder_reading("arena", &format!("wf{}", format_id(*f))))
            .collect();
        // The reductions: subgroup operations where subgroups are 32 wide, else trees in
        // workgroup memory.
        let reduce = if sg {
            shaders::MEGAKERNEL_REDUCE_SUBGROUP
        } else {
            shaders::MEGAKERNEL_REDUCE_SHARED
        };
        let enable = if sg { ctx.subgroups_enable() } else { "" };
        let mut parts: Vec<&str> = vec![
            enable,
            &consts,
            shaders::COMMON,
            shaders::ROPE_MATH,
            shaders::SAMPLER_PARAMS,
            shaders::SAMPLE_TOPK,
            shaders::SAMPLE_DRAW,
        ];
        parts.extend(decoders.iter().map(String::as_str));
        let switch = format_switch(&formats);
        parts.push(&switch);
        parts.push(reduce);
        let kernel = if grid_mode {
            shaders::MEGAKERNEL.replace("/*coherent*/", "@coherent")
        } else {
            shaders::MEGAKERNEL.to_string()
        };
        parts.push(&kernel);
        parts.push(shaders::MEGAKERNEL_GRID);
        let source = compose(&parts);
        let slots = [
            Slot::Uniform,
            Slot::ReadWrite, // state
            Slot::Read,      // arena
            Slot::Read,      // sampler
            Slot::ReadWrite, // kv
            Slot::ReadWrite, // scratch
            Slot::ReadWrite, // tokens
            Slot::ReadWrite, // counts
            Slot::ReadWrite, // gsync
        ];
        let label = if grid_mode {
            "megakernel-grid"
        } else {
            "megakernel"
        };
        let pipeline = Pipeline::new(ctx, label, &source, &slots).await?;
        Ok(Self {
            pipeline,
            shape,
            grid,
        })
    }

    /// The grid version's workgroup count (None: the portable version).
    pub fn grid(&self) -> Option<u32> {
        self.grid
    }

    pub fn shape(&self) -> &MegaShape {
        &self.shape
    }

    /// Binds the kernel; `params` is written by the host before each generation
    /// ([`MegaParams`], UNIFORM | COPY_DST).
    #[allow(clippy::too_many_arguments)]
    pub fn bind(
        &self,
        ctx: &GpuContext,
        params: &wgpu::Buffer,
        state: &wgpu::Buffer,
        arena: &wgpu::Buffer,
        sampler: &wgpu::Buffer,
        kv: &wgpu::Buffer,
        scratch: &wgpu::Buffer,
        tokens: &wgpu::Buffer,
        counts: &wgpu::Buffer,
        gsync: &wgpu::Buffer,
    ) -> Result<MegaCall> {
        let s = &self.shape;
        check_buffer(ctx, "megakernel kv", kv, s.kv_len())?;
        check_buffer(
            ctx,
            "megakernel scratch",
            scratch,
            s.scratch(self.grid).words,
        )?;
        check_buffer(ctx, "megakernel gsync", gsync, 4)?;
        check_buffer(ctx, "megakernel tokens", tokens, u64::from(s.n_ctx))?;
        check_buffer(ctx, "megakernel counts", counts, u64::from(s.n_vocab))?;
        check_buffer(ctx, "megakernel state", state, 4)?;
        let bound = self.pipeline.bind_plain(
            ctx,
            &[
                params, state, arena, sampler, kv, scratch, tokens, counts, gsync,
            ],
        )?;
        Ok(MegaCall {
            bound,
            workgroups: self.grid.unwrap_or(1),
        })
    }
}

/// Why the grid version cannot run `shape` with `g` workgroups here, if it cannot.
pub fn check_grid(ctx: &GpuContext, shape: &MegaShape, g: u32) -> Result<()> {
    if !ctx.has(wgpu::Features::MEMORY_DECORATION_COHERENT) {
        return Err(FuselmError::Gpu(
            "the grid megakernel needs coherent storage memory (wgpu's native \
             MEMORY_DECORATION_COHERENT: Vulkan, Metal, DX12); WebGPU has no such guarantee, \
             so browsers run the one-workgroup megakernel"
                .into(),
        ));
    }
    let max = ctx.device.limits().max_compute_workgroups_per_dimension;
    if g == 0 || g > max {
        return Err(FuselmError::InvalidArgument(format!(
            "grid workgroups must be 1..={max}; got {g}"
        )));
    }
    let limit = u64::from(ctx.device.limits().max_compute_workgroup_storage_size);
    let needed = shape.grid_workgroup_bytes();
    if needed > limit {
        return Err(FuselmError::LimitExceeded {
            limit: "maxComputeWorkgroupStorageSize (the grid megakernel's residual and FFN input)",
            needed,
            available: limit,
        });
    }
    Ok(())
}

impl MegaCall {
    /// Records `dispatches` dispatches (each carries on from `state`): of the one workgroup,
    /// or of the grid's workgroups. The grid version's `gsync` must be zeroed before each.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, dispatches: u32) {
        for _ in 0..dispatches {
            self.bound.dispatch(pass, [self.workgroups, 1, 1]);
        }
    }

    /// Records the occupancy discovery over `workgroups` workgroups (params.steps must be 0).
    pub fn record_discovery(&self, pass: &mut wgpu::ComputePass<'_>, workgroups: u32) {
        self.bound.dispatch(pass, [workgroups, 1, 1]);
    }
}
