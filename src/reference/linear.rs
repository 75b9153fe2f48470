//! Matrix-vector and matrix-matrix products against a row-major weight.

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
