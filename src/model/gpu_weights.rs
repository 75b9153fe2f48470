//! Uploading a GGUF model's tensors to the GPU, quantized as they are in the file.

use crate::error::{FuselmError, Result};
use crate::gguf::{dequantize_tensor, Gguf, GgufError, ModelConfig};
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

fn tensor<'a>(g: &'a Gguf, name: &str) -> Result<&'a crate::gguf::TensorInfo> {
    g.tensor(name)
        .ok_or_else(|| GgufError::MissingTensor { name: name.into() }.into())
}

/// A 2-D weight `[k, n]` uploaded in its ggml format (split by rows if a binding demands it).
fn matrix(ctx: &GpuContext, g: &Gguf, file: &[u8], name: &str) -> Result<GpuWeight> {
    let t = tensor(g, name)?;
    let (k, n) = match t.dims.as_slice() {
        [k] => (*k, 1),
        [k, n] => (*k, *n),
        dims => {
            return Err(FuselmError::InvalidArgument(format!(
                "{name}: expected a matrix, found dims {dims:?}"
            )))
        }
    };
    GpuWeight::upload(ctx, name, t.ggml_type()?, k, n, g.tensor_data(file, t)?)
}

/// A norm weight as f32 (they are F32 in practice; anything else is dequantized on load).
fn vector(ctx: &GpuContext, g: &Gguf, file: &[u8], name: &str) -> Result<wgpu::Buffer> {
    let t = tensor(g, name)?;
    let values = dequantize_tensor(t, g.tensor_data(file, t)?)?;
    Ok(ctx
        .device
        .create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(name),
            contents: bytemuck::cast_slice(&values),
            usage: wgpu::BufferUsages::STORAGE,
        }))
}

impl ModelWeights {
    pub fn upload(ctx: &GpuContext, g: &Gguf, file: &[u8], config: &ModelConfig) -> Result<Self> {
        if config.qkv_bias || config.attn_output_bias || config.rope_freqs {
            return Err(FuselmError::InvalidArgument(format!(
                "{}: attention biases and rope frequency factors are not supported on the GPU yet",
                config.arch
            )));
        }
        let mut layers = Vec::with_capacity(config.n_layers as usize);
        for i in 0..config.n_layers {
            let name = |s: &str| format!("blk.{i}.{s}");
            layers.push(LayerWeights {
                attn_norm: vector(ctx, g, file, &name("attn_norm.weight"))?,
                wq: matrix(ctx, g, file, &name("attn_q.weight"))?,
                wk: matrix(ctx, g, file, &name("attn_k.weight"))?,
                wv: matrix(ctx, g, file, &name("attn_v.weight"))?,
                wo: matrix(ctx, g, file, &name("attn_output.weight"))?,
                ffn_norm: vector(ctx, g, file, &name("ffn_norm.weight"))?,
                w_gate: matrix(ctx, g, file, &name("ffn_gate.weight"))?,
                w_up: matrix(ctx, g, file, &name("ffn_up.weight"))?,
                w_down: matrix(ctx, g, file, &name("ffn_down.weight"))?,
            });
        }
        Ok(Self {
            tok_embd: matrix(ctx, g, file, "token_embd.weight")?,
            layers,
            output_norm: vector(ctx, g, file, "output_norm.weight")?,
            output: match g.tensor("output.weight") {
                Some(_) => Some(matrix(ctx, g, file, "output.weight")?),
                None => None,
            },
        })
    }

    pub fn head(&self) -> &GpuWeight {
        self.output.as_ref().unwrap_or(&self.tok_embd)
    }
}
