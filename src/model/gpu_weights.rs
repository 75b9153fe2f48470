//! Uploading a GGUF model's tensors to the GPU, quantized as they are in the file.

use crate::error::{FuselmError, Result};
use crate::gguf::{
    dequantize_tensor, layer_tensor, FfnActivation, Gguf, GgufError, ModelConfig, TensorInfo,
    LAYER_TENSORS,
};
use crate::gpu::GpuContext;
use crate::kernels::GpuWeight;
use wgpu::util::DeviceExt;

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
}

/// Every weight of a llama-family model on the GPU.
pub struct ModelWeights {
    pub tok_embd: GpuWeight,
    pub layers: Vec<LayerWeights>,
    pub output_norm: wgpu::Buffer,
    /// `None`: the output head is `tok_embd` (tied embeddings).
    pub output: Option<GpuWeight>,
}

/// A tensor on the GPU as the loader uploads it: norms as f32 vectors, everything else as
/// matrices in their ggml format.
pub enum UploadedTensor {
    Matrix(GpuWeight),
    Vector(wgpu::Buffer),
}

/// Whether `name` is a norm weight (uploaded as an f32 vector).
pub fn is_norm(name: &str) -> bool {
    name.ends_with("norm.weight")
}

/// Whether the forward pass of `config` uses the tensor `name` (others are skipped on load).
pub fn is_model_tensor(name: &str, config: &ModelConfig) -> bool {
    if matches!(
        name,
        "token_embd.weight" | "output_norm.weight" | "output.weight"
    ) {
        return true;
    }
    let Some((layer, role)) = name.strip_prefix("blk.").and_then(|r| r.split_once('.')) else {
        return false;
    };
    layer.parse::<u32>().is_ok_and(|i| i < config.n_layers) && LAYER_TENSORS.contains(&role)
}

/// Uploads one tensor (`data`: its bytes as in the file).
pub fn upload_tensor(ctx: &GpuContext, t: &TensorInfo, data: &[u8]) -> Result<UploadedTensor> {
    let name = t.name.as_str();
    if is_norm(name) {
        let values = dequantize_tensor(t, data)?;
        return Ok(UploadedTensor::Vector(ctx.device.create_buffer_init(
            &wgpu::util::BufferInitDescriptor {
                label: Some(name),
                contents: bytemuck::cast_slice(&values),
                usage: wgpu::BufferUsages::STORAGE,
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

impl ModelWeights {
    /// Refuses model features the GPU path does not implement yet.
    pub fn check_supported(config: &ModelConfig) -> Result<()> {
        let mut missing = Vec::new();
        if config.qkv_bias || config.attn_output_bias {
            missing.push("attention biases");
        }
        if config.rope_freqs {
            missing.push("RoPE frequency factors");
        }
        if config.qk_norm {
            missing.push("Q/K norms");
        }
        if config.post_norms {
            missing.push("post-attention/FFN norms");
        }
        if config.ffn_activation != FfnActivation::Silu {
            missing.push("GELU gates");
        }
        if config.embedding_scale != 1.0 {
            missing.push("embedding scaling");
        }
        if config.sliding_window.is_some() {
            missing.push("sliding-window attention");
        }
        if missing.is_empty() {
            return Ok(());
        }
        Err(FuselmError::UnsupportedModel(format!(
            "architecture {}: the GPU kernels do not implement {} yet (the CPU reference does)",
            config.arch,
            missing.join(", ")
        )))
    }

    /// Uploads every weight of `config` from a whole file.
    pub fn upload(ctx: &GpuContext, g: &Gguf, file: &[u8], config: &ModelConfig) -> Result<Self> {
        Self::check_supported(config)?;
        Self::assemble(config, |name| {
            let Some(t) = g.tensor(name) else {
                return Ok(None);
            };
            upload_tensor(ctx, t, g.tensor_data(file, t)?).map(Some)
        })
    }

    /// Builds the model's weights from uploaded tensors: `take(name)` hands over the tensor
    /// `name` (`None` if the file has none; only `output.weight` is optional).
    pub fn assemble(
        config: &ModelConfig,
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
            });
        }
        let tok_embd = as_matrix("token_embd.weight", &mut get)?;
        let output_norm = as_vector("output_norm.weight", &mut get)?;
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
        })
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
