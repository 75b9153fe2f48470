//! Plain CPU f32 reference implementations of the forward-pass ops (llm.c style): written
//! for readability, checked against llama.cpp's formulas, and used as the ground truth the GPU
//! kernels are tested against. Weights are dense f32 (dequantize quantized tensors first, e.g.
//! with `gguf::dequantize`). Layouts are row-major; a weight with ggml dims `[k, n]` is `n`
//! rows of `k` values.

mod attention;
mod rope;

pub use attention::{
    attention, attention_scaled, causal_attention, windowed_attention, AttentionShape,
};
pub use rope::{rope, rope_theta};

/// RMS norm of each row of `x` (rows of `w.len()` values), times `w`:
/// `x / sqrt(mean(x^2) + eps) * w`, as llama.cpp's `rms_norm` followed by the weight multiply.
pub fn rms_norm(x: &[f32], w: &[f32], eps: f32) -> Vec<f32> {
    let n = w.len().max(1);
    let mut out = Vec::with_capacity(x.len());
    for row in x.chunks(n) {
        let sum: f32 = row.iter().map(|v| v * v).sum();
        let scale = 1.0 / (sum / n as f32 + eps).sqrt();
        out.extend(row.iter().zip(w).map(|(v, g)| v * scale * g));
    }
    out
}

/// `y[r] = sum_c w[r * k + c] * x[c]` for a weight of `n` rows of `k` values.
pub fn matvec(w: &[f32], x: &[f32], k: usize, n: usize) -> Vec<f32> {
    (0..n)
        .map(|r| {
            w[r * k..(r + 1) * k]
                .iter()
                .zip(x)
                .map(|(a, b)| a * b)
                .sum()
        })
        .collect()
}

/// `Y[t] = matvec(w, X[t])` for every row `t` of `x` (`x.len() / k` tokens): `X · W^T`,
/// `[n_tokens, n]`.
pub fn matmul(w: &[f32], x: &[f32], k: usize, n: usize) -> Vec<f32> {
    x.chunks(k.max(1))
        .flat_map(|row| matvec(w, row, k, n))
        .collect()
}

/// `x * sigmoid(x)`.
pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

/// `silu(gate) * up`, elementwise.
pub fn swiglu(gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter().zip(up).map(|(g, u)| silu(*g) * u).collect()
}

/// GELU, tanh approximation: `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))` (PyTorch's
/// `gelu(approximate="tanh")`, ggml's `gelu`).
pub fn gelu_tanh(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + 0.044_715 * x * x)).tanh())
}

/// `gelu_tanh(gate) * up`, elementwise.
pub fn geglu(gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(g, u)| gelu_tanh(*g) * u)
        .collect()
}

/// `a + b`, elementwise.
pub fn add(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.iter().zip(b).map(|(x, y)| x + y).collect()
}

/// Numerically stable softmax (max subtracted first).
pub fn softmax(x: &[f32]) -> Vec<f32> {
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let e: Vec<f32> = x.iter().map(|v| (v - max).exp()).collect();
    let sum: f32 = e.iter().sum();
    e.iter().map(|v| v / sum).collect()
}

/// Index of the largest value; ties go to the lowest index and NaN is never chosen, as
/// llama.cpp's greedy sampler (`if (logit > best) best = i` scanning ids upwards). `None` for
/// an empty or all-NaN slice.
pub fn argmax(x: &[f32]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &v) in x.iter().enumerate() {
        if v.is_nan() {
            continue;
        }
        if best.is_none_or(|(_, b)| v > b) {
            best = Some((i, v));
        }
    }
    best.map(|(i, _)| i)
}
