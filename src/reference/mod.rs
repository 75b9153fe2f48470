//! Plain CPU f32 reference implementations of the forward-pass ops (llm.c style): written
//! for readability, checked against llama.cpp's formulas, and used as the ground truth the GPU
//! kernels are tested against. Weights are dense f32 (dequantize quantized tensors first, e.g.
//! with `gguf::dequantize`). Layouts are row-major; a weight with ggml dims `[k, n]` is `n`
//! rows of `k` values.

mod argmax;
mod attention;
mod elementwise;
mod linear;
mod rms_norm;
mod rope;
mod softmax;

pub use argmax::argmax;
pub use attention::{
    attention, attention_scaled, causal_attention, windowed_attention, AttentionShape,
};
pub use elementwise::{add, geglu, gelu_tanh, silu, swiglu};
pub use linear::{matmul, matvec};
pub use rms_norm::rms_norm;
pub use rope::{rope, rope_scaled, rope_theta, RopeScale};
pub use softmax::softmax;
