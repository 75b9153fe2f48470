//! Uploading a GGUF model's tensors to the GPU, quantized as they are in the file.

use super::session::Fingerprint;
use crate::error::{FuselmError, Result};
use crate::gguf::{
    dequantize_tensor, layer_tensor, Gguf, GgufError, ModelConfig, TensorInfo, FUSED_QKV,
    LAYER_TENSORS, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT, ROPE_FREQS,
};
use crate::gpu::GpuContext;
use crate::kernels::{GpuWeight, LayerStacks};

/// One transformer block's weights on the GPU.
pub struct LayerWeights {
    pub attn_norm: wgpu::Buffer,
    pub wq: GpuWeight,
    pub wk: GpuWeight,
    pub wv: GpuWeight,
    pub wo: GpuWeight,
    pub ffn_norm: wgpu::Buffer,
    pub w_gate: GpuWeight,
    pub w_up: GpuWeight,
    pub w_down: GpuWeight,
    /// The architecture's optional tensors (`ModelConfig` says which exist), as f32 vectors.
    pub extra: LayerExtras,
}

/// Per-layer vectors only some architectures have.
#[derive(Default)]
pub struct LayerExtras {
    /// Q/K/V biases (qwen2), `[n_q]`, `[n_kv]`, `[n_kv]`.
    pub bq: Option<wgpu::Buffer>,
    pub bk: Option<wgpu::Buffer>,
    pub bv: Option<wgpu::Buffer>,
    /// Output-projection bias, `[n_embd]`.
    pub bo: Option<wgpu::Buffer>,
    /// Per-head Q and K norms (qwen3, gemma3), `[head_dim]`.
    pub q_norm: Option<wgpu::Buffer>,
    pub k_norm: Option<wgpu::Buffer>,
    /// Norms of the attention and FFN outputs (gemma3), `[n_embd]`.
    pub post_attn_norm: Option<wgpu::Buffer>,
    pub post_ffn_norm: Option<wgpu::Buffer>,
}

impl LayerExtras {
    /// Bytes of the vectors present.
    pub fn bytes(&self) -> u64 {
        [
            &self.bq,
            &self.bk,
            &self.bv,
            &self.bo,
            &self.q_norm,
            &self.k_norm,
            &self.post_attn_norm,
            &self.post_ffn_norm,
        ]
        .into_iter()
        .flatten()
        .map(|b| b.size())
        .sum()
    }
}

/// Per-layer tensors beyond [`LAYER_TENSORS`] that `config` has, by suffix.
pub fn extra_layer_tensors(config: &ModelConfig) -> Vec<&'static str> {
    let mut out = Vec::new();
    if config.qkv_bias {
        out.extend(["attn_q.bias", "attn_k.bias", "attn_v.bias"]);
    }
    if config.attn_output_bias {
        out.push("attn_output.bias");
    }
    if config.qk_norm {
        out.extend(["attn_q_norm.weight", "attn_k_norm.weight"]);
    }
    if config.post_norms {
        out.extend(["post_attention_norm.weight", "post_ffw_norm.weight"]);
    }
    out
}

/// Every weight of a llama-family model on the GPU.
pub struct ModelWeights {
    pub tok_embd: GpuWeight,
    pub layers: Vec<LayerWeights>,
    pub output_norm: wgpu::Buffer,
    /// `None`: the output head is `tok_embd` (tied embeddings).
    pub output: Option<GpuWeight>,
    /// Which layer matrices are stacked across layers ([`ModelWeights::stack_layers`]).
    pub stacks: LayerStacks,
    /// RoPE frequency factors by tensor name (Llama 3's `rope_freqs`, Phi-3's long and
    /// short), `[rope_dims / 2]` f32 each; [`ModelConfig::rope_factors_tensor`] says which
    /// one a context uses.
    pub rope_factors: Vec<(&'static str, wgpu::Buffer)>,
    /// The weights' identity, which saved sessions carry ([`super::session::Fingerprint`]).
    pub identity: u32,
}

/// A tensor on the GPU as the loader uploads it: norms as f32 vectors, everything else as
/// matrices in their ggml format.
pub enum UploadedTensor {
    Matrix(GpuWeight),
    Vector(wgpu::Buffer),
}

/// Whether `name` is a norm weight, a bias or RoPE factors (uploaded as an f32 vector).
pub fn is_vector(name: &str) -> bool {
    name.ends_with("norm.weight")
        || name.ends_with(".bias")
        || [ROPE_FREQS, ROPE_FACTORS_LONG, ROPE_FACTORS_SHORT].contains(&name)
}

/// Whether the forward pass of `config` uses the tensor `name` (others are skipped on load).
pub fn is_model_tensor(name: &str, config: &ModelConfig) -> bool {
    if matches!(
        name,
        "token_embd.weight" | "output_norm.weight" | "output.weight"
    ) {
        return true;
    }
    if name == ROPE_FREQS {
        return config.rope_freqs;
    }
    if name == ROPE_FACTORS_LONG || name == ROPE_FACTORS_SHORT {
        return config.long_rope.is_some();
    }
    let Some((layer, role)) = name.strip_prefix("blk.").and_then(|r| r.split_once('.')) else {
        return false;
    };
    layer.parse::<u32>().is_ok_and(|i| i < config.n_layers)
        && (LAYER_TENSORS.contains(&role)
            || (config.fused_qkv && role == FUSED_QKV)
            || extra_layer_tensors(config).contains(&role))
}

/// Uploads one tensor (`data`: its bytes as in the file).
pub fn upload_tensor(ctx: &GpuContext, t: &TensorInfo, data: &[u8]) -> Result<UploadedTensor> {
    let name = t.name.as_str();
    if is_vector(name) {
        let values = dequantize_tensor(t, data)?;
        return Ok(UploadedTensor::Vector(ctx.create_buffer_init(
            &wgpu::util::BufferInitDescriptor {
                label: Some(name),
                contents: bytemuck::cast_slice(&values),
                // COPY_SRC: the fused step copies every vector into one arena.
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            },
        )));
    }
    let (k, n) = match t.dims.as_slice() {
        [k] => (*k, 1),
        [k, n] => (*k, *n),
        dims => {
            return Err(FuselmError::InvalidArgument(format!(
                "{name}: expected a matrix, found dims {dims:?}"
            )))
        }
    };
    Ok(UploadedTensor::Matrix(GpuWeight::upload(
        ctx,
        name,
        t.ggml_type()?,
        k,
        n,
        data,
    )?))
}

/// Uploads one stored tensor as the logical tensors it holds, by full name: itself, or the
/// parts [`ModelConfig::row_split`] gives (phi3's `attn_qkv` as Q, K and V; its double
/// `ffn_up` as gate and up), each a byte range of `data` uploaded as its own matrix.
pub fn upload_tensor_parts(
    ctx: &GpuContext,
    t: &TensorInfo,
    data: &[u8],
    config: &ModelConfig,
) -> Result<Vec<(String, UploadedTensor)>> {
    let split = t
        .name
        .strip_prefix("blk.")
        .and_then(|r| r.split_once('.'))
        .and_then(|(layer, suffix)| Some((layer, config.row_split(suffix)?)));
    let Some((layer, parts)) = split else {
        return Ok(vec![(t.name.clone(), upload_tensor(ctx, t, data)?)]);
    };
    let ty = t.ggml_type()?;
    let k = t.dims.first().copied().unwrap_or(0);
    let row = ty.row_bytes(k).ok_or_else(|| {
        FuselmError::InvalidArgument(format!(
            "{}: rows of {k} values are not whole blocks",
            t.name
        ))
    })?;
    let mut out = Vec::with_capacity(parts.len());
    for (suffix, first, rows) in parts {
        let name = format!("blk.{layer}.{suffix}");
        let bytes = data
            .get((first * row) as usize..((first + rows) * row) as usize)
            .ok_or_else(|| {
                FuselmError::InvalidArgument(format!(
                    "{}: {} bytes hold no rows {first}..{} of {row} bytes",
                    t.name,
                    data.len(),
                    first + rows
                ))
            })?;
        let w = GpuWeight::upload(ctx, &name, ty, k, rows, bytes)?;
        out.push((name, UploadedTensor::Matrix(w)));
    }
    Ok(out)
}

impl ModelWeights {
    /// Refuses model features the GPU path does not implement yet: RoPE scaling other than
    /// linear (YaRN changes the angles by more than a scale). Frequency factors (Llama 3,
    /// Phi-3's LongRoPE), linear scaling (Gemma 3 4B+) and an attention factor are
    /// implemented. Refusing beats rotating wrongly: the output would look fluent and be wrong.
    pub fn check_supported(config: &ModelConfig) -> Result<()> {
        if config.rope_freq_scale().is_none() {
            if let Some(s) = &config.rope_scaling {
                return Err(FuselmError::UnsupportedModel(format!(
                    "architecture {}: the GPU kernels implement linear RoPE scaling and \
                     frequency factors, not {}.rope.scaling.type {} (factor {})",
                    config.arch, config.arch, s.kind, s.factor
                )));
            }
        }
        Ok(())
    }

    /// Uploads every weight of `config` from a whole file.
    pub fn upload(ctx: &GpuContext, g: &Gguf, file: &[u8], config: &ModelConfig) -> Result<Self> {
        Self::check_supported(config)?;
        let mut uploaded = std::collections::HashMap::new();
        let mut fingerprint = Fingerprint::default();
        for t in g.tensors() {
            if is_model_tensor(&t.name, config) {
                let data = g.tensor_data(file, t)?;
                fingerprint.add(t, data);
                uploaded.extend(upload_tensor_parts(ctx, t, data, config)?);
            }
        }
        Self::assemble(config, fingerprint.finish(), |name| {
            Ok(uploaded.remove(name))
        })
    }

    /// Builds the model's weights from uploaded tensors: `take(name)` hands over the tensor
    /// `name` (`None` if the file has none; only `output.weight` is optional). `identity`: the
    /// [`Fingerprint`] of the uploaded tensors.
    pub fn assemble(
        config: &ModelConfig,
        identity: u32,
        mut take: impl FnMut(&str) -> Result<Option<UploadedTensor>>,
    ) -> Result<Self> {
        let mut get = |name: &str| -> Result<UploadedTensor> {
            take(name)?.ok_or_else(|| GgufError::MissingTensor { name: name.into() }.into())
        };
        let mut layers = Vec::with_capacity(config.n_layers as usize);
        for i in 0..config.n_layers {
            let mut m = |s: &str| as_matrix(&layer_tensor(i, s), &mut get);
            let (wq, wk, wv, wo) = (
                m("attn_q.weight")?,
                m("attn_k.weight")?,
                m("attn_v.weight")?,
                m("attn_output.weight")?,
            );
            let (w_gate, w_up, w_down) = (
                m("ffn_gate.weight")?,
                m("ffn_up.weight")?,
                m("ffn_down.weight")?,
            );
            let mut extra = LayerExtras::default();
            for suffix in extra_layer_tensors(config) {
                let v = Some(as_vector(&layer_tensor(i, suffix), &mut get)?);
                match suffix {
                    "attn_q.bias" => extra.bq = v,
                    "attn_k.bias" => extra.bk = v,
                    "attn_v.bias" => extra.bv = v,
                    "attn_output.bias" => extra.bo = v,
                    "attn_q_norm.weight" => extra.q_norm = v,
                    "attn_k_norm.weight" => extra.k_norm = v,
                    "post_attention_norm.weight" => extra.post_attn_norm = v,
                    "post_ffw_norm.weight" => extra.post_ffn_norm = v,
                    other => return Err(not_a(other, "known per-layer vector")),
                }
            }
            layers.push(LayerWeights {
                attn_norm: as_vector(&layer_tensor(i, "attn_norm.weight"), &mut get)?,
                wq,
                wk,
                wv,
                wo,
                ffn_norm: as_vector(&layer_tensor(i, "ffn_norm.weight"), &mut get)?,
                w_gate,
                w_up,
                w_down,
                extra,
            });
        }
        let tok_embd = as_matrix("token_embd.weight", &mut get)?;
        let output_norm = as_vector("output_norm.weight", &mut get)?;
        let mut rope_factors = Vec::new();
        for (name, present) in [
            (ROPE_FREQS, config.rope_freqs),
            (ROPE_FACTORS_LONG, config.long_rope.is_some()),
            (ROPE_FACTORS_SHORT, config.long_rope.is_some()),
        ] {
            if present {
                rope_factors.push((name, as_vector(name, &mut get)?));
            }
        }
        let output = match take("output.weight")? {
            Some(UploadedTensor::Matrix(w)) => Some(w),
            Some(UploadedTensor::Vector(_)) => return Err(not_a("output.weight", "matrix")),
            None => None,
        };
        Ok(Self {
            tok_embd,
            layers,
            output_norm,
            output,
            stacks: LayerStacks::default(),
            rope_factors,
            identity,
        })
    }

    /// Moves each layer matrix role (wq, wk, …, down) into one buffer for all layers where the
    /// layers agree on its format and shape and the stack fits a storage binding
    /// ([`GpuWeight::stack`]), so the fused kernels bind every layer at once. Call before
    /// anything binds the weights. Costs no memory once done (the per-layer buffers are
    /// released; while copying, one role's matrices exist twice).
    pub fn stack_layers(&mut self, ctx: &GpuContext) {
        let mut stacks = LayerStacks::default();
        for role in 0..7 {
            let mut ws: Vec<&mut GpuWeight> = self
                .layers
                .iter_mut()
                .map(|l| match role {
                    0 => &mut l.wq,
                    1 => &mut l.wk,
                    2 => &mut l.wv,
                    3 => &mut l.wo,
                    4 => &mut l.w_gate,
                    5 => &mut l.w_up,
                    _ => &mut l.w_down,
                })
                .collect();
            let label = ["wq", "wk", "wv", "wo", "w_gate", "w_up", "w_down"][role];
            stacks.stride_rows[role] = GpuWeight::stack(ctx, label, &mut ws).unwrap_or(0);
        }
        self.stacks = stacks;
    }

    /// The RoPE factors a KV cache of `n_ctx` positions uses, if the model has any.
    pub fn rope_factors_for(&self, config: &ModelConfig, n_ctx: u32) -> Option<&wgpu::Buffer> {
        let name = config.rope_factors_tensor(n_ctx)?;
        self.rope_factors
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, b)| b)
    }

    pub fn head(&self) -> &GpuWeight {
        self.output.as_ref().unwrap_or(&self.tok_embd)
    }

    /// Every weight matrix (the norms are f32 vectors and not listed).
    pub fn matrices(&self) -> Vec<&GpuWeight> {
        let mut all: Vec<&GpuWeight> = self
            .layers
            .iter()
            .flat_map(|l| [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down])
            .collect();
        all.push(&self.tok_embd);
        all.extend(self.output.as_ref());
        all
    }

    /// Bytes of every weight on the GPU.
    pub fn gpu_bytes(&self) -> u64 {
        let layers: u64 = self
            .layers
            .iter()
            .map(|l| {
                [&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down]
                    .into_iter()
                    .map(|w| w.gpu_bytes())
                    .sum::<u64>()
                    + l.attn_norm.size()
                    + l.ffn_norm.size()
                    + l.extra.bytes()
            })
            .sum();
        layers
            + self.tok_embd.gpu_bytes()
            + self.output.as_ref().map_or(0, |w| w.gpu_bytes())
            + self.output_norm.size()
    }
}

fn not_a(name: &str, what: &str) -> FuselmError {
    FuselmError::InvalidArgument(format!("{name}: expected a {what}"))
}

fn as_matrix(
    name: &str,
    get: &mut impl FnMut(&str) -> Result<UploadedTensor>,
) -> Result<GpuWeight> {
    match get(name)? {
        UploadedTensor::Matrix(w) => Ok(w),
        UploadedTensor::Vector(_) => Err(not_a(name, "matrix")),
    }
}

fn as_vector(
    name: &str,
    get: &mut impl FnMut(&str) -> Result<UploadedTensor>,
) -> Result<wgpu::Buffer> {
    match get(name)? {
        UploadedTensor::Vector(b) => Ok(b),
        UploadedTensor::Matrix(_) => Err(not_a(name, "vector")),
    }
}
