//! A GGUF model resident on the GPU.
//!
//! Load uploads the weights quantized, compiles the kernels of every strategy and preallocates
//! every buffer (KV cache of fixed capacity `n_ctx`), so nothing is allocated per token.
//! Generation itself (the strategies) is in `generation.rs`; this file holds loading, the
//! prefill shared by the strategies, and the logits entry points used by tests.

use super::activations::Activations;
use super::fused_step::{Fused, SamplerBuffers};
use super::gpu_weights::ModelWeights;
use super::step::{Kernels, Step, StepKind};
use crate::error::{FuselmError, Result};
use crate::gguf::{Gguf, ModelConfig};
use crate::gpu::{read_buffer, GpuContext};
use crate::kernels::{DecodeState, KvFormat};
use serde::{Deserialize, Serialize};

/// How to size a loaded model's buffers.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct LoadOptions {
    /// KV-cache capacity in tokens (prompt + generated). Default: min(model context, 2048).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub n_ctx: Option<u32>,
    /// Prompt tokens processed per prefill batch. Default: 128.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub max_batch: Option<u32>,
    /// Keep the KV cache in f16 (half the memory and attention bandwidth; rounds K and V to
    /// f16, as llama.cpp does by default). Needs the adapter's `shader-f16` feature (see
    /// `probe().features.shaderF16`); without it loading fails with "invalid-argument".
    /// Default: false (f32, exact).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub kv_f16: Option<bool>,
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub enum StopReason {
    /// The model produced an end-of-generation token (not included in the output).
    EndOfGeneration,
    /// `maxTokens` were generated.
    Length,
    /// The text reached one of the `stop` sequences (not included in the output).
    StopSequence,
    /// The caller stopped it.
    Aborted,
}

const DEFAULT_N_CTX: u32 = 2048;
const DEFAULT_MAX_BATCH: u32 = 128;

pub struct GpuModel {
    pub(super) ctx: GpuContext,
    pub(super) config: ModelConfig,
    pub(super) weights: ModelWeights,
    kernels: Kernels,
    pub(super) acts: Activations,
    kv: KvFormat,
    pub(super) prefill: Step,
    pub(super) decode: Step,
    all_logits: Option<Step>,
    pub(super) sampler: SamplerBuffers,
    /// The fused decode step with its head and GPU sampler, or why this model cannot use it.
    pub(super) fused: std::result::Result<Fused, FuselmError>,
    /// The tokens whose KV-cache rows `0..len` are valid: what the last generation left behind,
    /// so the next one can skip the prefill of a shared prefix (`reuse_prefix`).
    pub(super) kv_valid: Vec<u32>,
    /// Whether `kv_valid` describes the megakernel's own KV cache (else the shared one).
    pub(super) kv_in_mega: bool,
    /// The megakernel, built on its first use (it copies the weights into its arena), or why
    /// this model cannot use it.
    pub(super) mega: Option<std::result::Result<super::megakernel::MegaModel, FuselmError>>,
    /// The default strategy and its reason from a calibration (`calibrate`, `use_calibration`),
    /// which overrides the planner's rule of thumb.
    pub(super) calibrated: Option<(super::generation::Strategy, String)>,
    /// The grid megakernel's workgroup count, if the caller fixed one.
    pub(super) grid_workgroups: Option<u32>,
    /// What the grid megakernel's occupancy discovery measured (on its first use).
    pub(super) grid_discovered: Option<u32>,
    /// Staging buffers for the fused strategy's token readbacks, reused across chunks.
    pub(super) staging: crate::gpu::StagingPool,
}

/// GPU memory a loaded model holds, in bytes.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct MemoryUse {
    /// Weight matrices and norms, in their GPU layout.
    pub weights: u64,
    /// Keys and values of `nCtx` positions for every layer.
    pub kv_cache: u64,
    /// Activations, logits and the sampler's buffers.
    pub activations: u64,
    /// The megakernel's weight arena (a second copy of the weights, in one buffer), KV cache
    /// and scratch; 0 until a generation first uses the megakernel.
    pub megakernel: u64,
    pub total: u64,
}

/// How many weight matrices use one ggml type, and their bytes on the GPU.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
pub struct QuantUse {
    /// ggml's name: "Q4_1", "Q8_0", "F16", …
    pub ggml_type: String,
    pub matrices: u32,
    pub bytes: u64,
}

/// KV capacity, prefill batch and KV format of a load.
pub(crate) fn sizes(config: &ModelConfig, options: &LoadOptions) -> (u32, u32, KvFormat) {
    let n_ctx = options
        .n_ctx
        .unwrap_or(config.context_length.min(DEFAULT_N_CTX))
        .max(1);
    let max_batch = options
        .max_batch
        .unwrap_or(DEFAULT_MAX_BATCH)
        .clamp(1, n_ctx);
    let kv = if options.kv_f16.unwrap_or(false) {
        KvFormat::F16
    } else {
        KvFormat::F32
    };
    (n_ctx, max_batch, kv)
}

/// Refuses a model that cannot fit the adapter before anything is uploaded (the streaming loader
/// calls it as soon as the header has arrived, before the weights are downloaded): weights with
/// no GPU kernel, a weight row or an activation/KV buffer over the adapter's binding limit.
pub(crate) fn check_fit(
    ctx: &GpuContext,
    config: &ModelConfig,
    gguf: &Gguf,
    options: &LoadOptions,
) -> Result<()> {
    ModelWeights::check_supported(config)?;
    let limits = ctx.device.limits();
    let cap = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size);
    let over = |needed: u64| -> Result<()> {
        if needed > cap {
            return Err(FuselmError::LimitExceeded {
                limit: "maxStorageBufferBindingSize",
                needed,
                available: cap,
            });
        }
        Ok(())
    };
    for t in gguf.tensors() {
        if !super::gpu_weights::is_model_tensor(&t.name, config) {
            continue;
        }
        let ty = t.ggml_type()?;
        if super::gpu_weights::is_vector(&t.name) {
            continue;
        }
        let format = crate::kernels::WeightFormat::from_ggml(ty)?;
        over(format.gpu_row_bytes(t.dims.first().copied().unwrap_or(1)))?;
    }
    let (n_ctx, max_batch, kv) = sizes(config, options);
    let kv_dim = u64::from(config.n_head_kv) * u64::from(config.head_dim);
    over(kv_dim * u64::from(n_ctx) * kv.bytes())?;
    let widest = u64::from(
        config
            .n_ff
            .max(config.n_embd)
            .max(config.n_head * config.head_dim),
    );
    over(u64::from(max_batch) * widest * 4)?;
    over(u64::from(config.vocab_size) * 4)?;
    Ok(())
}

/// The out-of-memory and validation error scopes around a load; popped into a typed error.
/// Fields drop in order, so `invalid` (pushed last) is popped first on an early return.
pub(crate) struct LoadScopes {
    invalid: wgpu::ErrorScopeGuard,
    oom: wgpu::ErrorScopeGuard,
}

impl LoadScopes {
    pub(crate) fn push(ctx: &GpuContext) -> Self {
        let oom = ctx.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let invalid = ctx.device.push_error_scope(wgpu::ErrorFilter::Validation);
        Self { invalid, oom }
    }

    pub(crate) async fn pop(self) -> Result<()> {
        if let Some(e) = self.invalid.pop().await {
            return Err(FuselmError::Gpu(format!("loading the model: {e}")));
        }
        if let Some(e) = self.oom.pop().await {
            return Err(FuselmError::Gpu(format!(
                "loading the model: the GPU ran out of memory ({e}); try a smaller nCtx or model"
            )));
        }
        Ok(())
    }
}

impl GpuModel {
    /// Parses `file` (a whole GGUF), uploads its weights and prepares every kernel.
    pub async fn load(ctx: GpuContext, file: &[u8], options: &LoadOptions) -> Result<Self> {
        let gguf = Gguf::parse(file)?;
        Self::load_parsed(ctx, &gguf, file, options).await
    }

    pub async fn load_parsed(
        ctx: GpuContext,
        gguf: &Gguf,
        file: &[u8],
        options: &LoadOptions,
    ) -> Result<Self> {
        let config = ModelConfig::from_gguf(gguf)?;
        check_fit(&ctx, &config, gguf, options)?;
        // Out-of-memory and validation errors while uploading and binding become a typed error
        // (natively wgpu would otherwise panic; browsers would only log them).
        let scopes = LoadScopes::push(&ctx);
        let weights = ModelWeights::upload(&ctx, gguf, file, &config)?;
        Self::from_weights(ctx, config, weights, options, scopes).await
    }

    /// The rest of a load once every weight is on the GPU: kernels, buffers and bindings. The
    /// error scopes pushed before the upload are popped here.
    pub(crate) async fn from_weights(
        ctx: GpuContext,
        config: ModelConfig,
        mut weights: ModelWeights,
        options: &LoadOptions,
        scopes: LoadScopes,
    ) -> Result<Self> {
        let (n_ctx, max_batch, kv) = sizes(&config, options);
        weights.stack_layers(&ctx);
        let built = async {
            let kernels = Kernels::new(&ctx, &weights, kv).await?;
            let acts = Activations::new(&ctx, &config, n_ctx, max_batch, kv, false)?;
            let prefill = Step::bind(&ctx, &kernels, &weights, &acts, &config, StepKind::Prefill)?;
            let decode = Step::bind(&ctx, &kernels, &weights, &acts, &config, StepKind::Decode)?;
            let sampler = SamplerBuffers::new(&ctx, &weights, config.vocab_size);
            let fused = Fused::bind(&ctx, &config, &weights, &acts, &sampler, kv).await;
            Ok::<_, FuselmError>((kernels, acts, prefill, decode, sampler, fused))
        }
        .await;
        scopes.pop().await?;
        let (kernels, acts, prefill, decode, sampler, fused) = built?;
        Ok(Self {
            ctx,
            config,
            weights,
            kernels,
            acts,
            kv,
            prefill,
            decode,
            all_logits: None,
            sampler,
            fused,
            kv_valid: Vec::new(),
            kv_in_mega: false,
            mega: None,
            calibrated: None,
            grid_workgroups: None,
            grid_discovered: None,
            staging: crate::gpu::StagingPool::default(),
        })
    }

    /// The weight matrices' formats: how many matrices and GPU bytes each format has.
    pub fn quant_types(&self) -> Vec<QuantUse> {
        let mut out: Vec<QuantUse> = Vec::new();
        for w in self.weights.matrices() {
            let name = w.format.ggml().name();
            match out.iter_mut().find(|q| q.ggml_type == name) {
                Some(q) => {
                    q.matrices += 1;
                    q.bytes += w.gpu_bytes();
                }
                None => out.push(QuantUse {
                    ggml_type: name.to_string(),
                    matrices: 1,
                    bytes: w.gpu_bytes(),
                }),
            }
        }
        out
    }

    /// GPU memory this model holds, by purpose.
    pub fn memory(&self) -> MemoryUse {
        let a = &self.acts;
        let kv_cache: u64 = a.k_cache.iter().chain(&a.v_cache).map(|b| b.size).sum();
        let mut activations: u64 = [
            &a.state, &a.tokens, &a.x, &a.xn, &a.q, &a.k, &a.v, &a.att, &a.o, &a.gate, &a.up,
            &a.hidden, &a.x_last, &a.logits,
        ]
        .into_iter()
        .map(|b| b.size())
        .sum();
        activations += a.logits_all.as_ref().map_or(0, |b| b.size());
        activations += self.sampler.bytes();
        let weights = self.weights.gpu_bytes();
        let megakernel = match &self.mega {
            Some(Ok(m)) => m.bytes(),
            _ => 0,
        };
        MemoryUse {
            weights,
            kv_cache,
            activations,
            megakernel,
            total: weights + kv_cache + activations + megakernel,
        }
    }

    /// Bytes of one KV-cache value (4 for f32, 2 for f16).
    pub fn kv_bytes_per_value(&self) -> u64 {
        self.kv.bytes()
    }

    /// Bytes of the output head on the GPU.
    pub fn head_bytes(&self) -> u64 {
        self.weights.head().gpu_bytes()
    }

    /// Weight bytes one decode step streams: every layer matrix and the output head (the
    /// norms and one embedding row are negligible and not counted).
    pub fn decode_weight_bytes(&self) -> u64 {
        let layers: u64 = self
            .weights
            .layers
            .iter()
            .map(|l| {
                [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
                    .into_iter()
                    .map(|w| w.gpu_bytes())
                    .sum::<u64>()
            })
            .sum();
        layers + self.head_bytes()
    }

    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    pub fn n_ctx(&self) -> u32 {
        self.acts.n_ctx
    }

    pub fn context(&self) -> &GpuContext {
        &self.ctx
    }

    pub(super) fn check_tokens(&self, tokens: &[u32], extra: u32) -> Result<()> {
        super::cpu_reference::check_tokens(tokens, self.config.vocab_size)?;
        let needed = tokens.len() as u64 + u64::from(extra);
        if needed > u64::from(self.acts.n_ctx) {
            return Err(FuselmError::LimitExceeded {
                limit: "nCtx (KV-cache capacity in tokens)",
                needed,
                available: u64::from(self.acts.n_ctx),
            });
        }
        Ok(())
    }

    pub(super) fn write_state(&self, pos: u32, n_tokens: u32) {
        let state = DecodeState::new(pos, n_tokens);
        self.ctx
            .queue
            .write_buffer(&self.acts.state, 0, bytemuck::bytes_of(&state));
    }

    pub(super) fn submit(
        &self,
        record: impl FnOnce(&mut wgpu::ComputePass<'_>) -> Result<()>,
    ) -> Result<()> {
        let mut encoder = self.ctx.device.create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("fuselm forward"),
                timestamp_writes: None,
            });
            record(&mut pass)?;
        }
        self.ctx.queue.submit([encoder.finish()]);
        Ok(())
    }

    /// Writes the prompt and runs every prefill batch but the last, from position `start` (the
    /// rows before it are already in the KV cache); returns the last batch's start, whose state
    /// is written and which the caller records with a head.
    pub(super) fn prefill_all_but_last(&self, prompt: &[u32], start: u32) -> Result<u32> {
        self.ctx
            .queue
            .write_buffer(&self.acts.tokens, 0, bytemuck::cast_slice(prompt));
        let n = prompt.len() as u32;
        let mut pos = start;
        while n - pos > self.acts.max_batch {
            let batch = self.acts.max_batch;
            self.write_state(pos, batch);
            self.submit(|pass| self.prefill.record_body(pass, batch))?;
            pos += batch;
        }
        self.write_state(pos, n - pos);
        Ok(pos)
    }

    /// The logits that follow `tokens` (a fresh context): `[vocab]`.
    pub async fn next_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.check_tokens(tokens, 0)?;
        self.kv_valid.clear();
        let last = self.prefill_all_but_last(tokens, 0)?;
        self.submit(|pass| self.prefill.record(pass, tokens.len() as u32 - last))?;
        let bytes = read_buffer(
            &self.ctx.device,
            &self.ctx.queue,
            &self.acts.logits,
            0,
            u64::from(self.config.vocab_size) * 4,
        )
        .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// Teacher forcing: the logits after every prefix of `tokens` (a fresh context),
    /// `[tokens.len(), vocab]`. At most `max_batch` tokens.
    pub async fn all_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.check_tokens(tokens, 0)?;
        let n = tokens.len() as u32;
        if n > self.acts.max_batch {
            return Err(FuselmError::InvalidArgument(format!(
                "all_logits takes at most maxBatch = {} tokens, got {n}",
                self.acts.max_batch
            )));
        }
        self.kv_valid.clear();
        if self.all_logits.is_none() {
            let acts = Activations::new(
                &self.ctx,
                &self.config,
                self.acts.n_ctx,
                self.acts.max_batch,
                self.kv,
                true,
            )?;
            self.acts = acts;
            // The megakernel is bound to the old activations (state, tokens): rebuilt on use.
            self.mega = None;
            self.prefill = Step::bind(
                &self.ctx,
                &self.kernels,
                &self.weights,
                &self.acts,
                &self.config,
                StepKind::Prefill,
            )?;
            self.decode = Step::bind(
                &self.ctx,
                &self.kernels,
                &self.weights,
                &self.acts,
                &self.config,
                StepKind::Decode,
            )?;
            self.fused = Fused::bind(
                &self.ctx,
                &self.config,
                &self.weights,
                &self.acts,
                &self.sampler,
                self.kv,
            )
            .await;
            self.all_logits = Some(Step::bind(
                &self.ctx,
                &self.kernels,
                &self.weights,
                &self.acts,
                &self.config,
                StepKind::AllLogits,
            )?);
        }
        let step = self
            .all_logits
            .as_ref()
            .ok_or_else(|| FuselmError::Gpu("all-logits step missing".into()))?;
        self.ctx
            .queue
            .write_buffer(&self.acts.tokens, 0, bytemuck::cast_slice(tokens));
        self.write_state(0, n);
        self.submit(|pass| step.record(pass, n))?;
        let logits_all = self
            .acts
            .logits_all
            .as_ref()
            .ok_or_else(|| FuselmError::Gpu("all-logits buffer missing".into()))?;
        let bytes = read_buffer(
            &self.ctx.device,
            &self.ctx.queue,
            logits_all,
            0,
            u64::from(n) * u64::from(self.config.vocab_size) * 4,
        )
        .await?;
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }
}
