//! RMS norm, as llama.cpp's `rms_norm` followed by the weight multiply.

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
