//! Matrix-vector and matrix-matrix products against a row-major weight.
//!
//! Every output is one sum over its row's columns in column order, starting from -0.0 (what
//! `Iterator::sum` does for f32); the loops only interleave independent sums (`LANES` tokens, or
//! `LANES` rows of one token) so a CPU overlaps them, which leaves each result bit for bit what
//! the one-at-a-time sum gives.

/// Independent sums run together (four SSE vectors).
const LANES: usize = 16;

/// `y[r] = sum_c w[r * k + c] * x[c]` for a weight of `n` rows of `k` values.
pub fn matvec(w: &[f32], x: &[f32], k: usize, n: usize) -> Vec<f32> {
    let x = &x[..k];
    let mut y = vec![0f32; n];
    // LANES rows at a time, transposed to `[k][LANES]` against the one token.
    let mut wt = vec![0f32; k * LANES];
    for (r0, out) in (0..n).step_by(LANES).zip(y.chunks_mut(LANES)) {
        transpose(&w[r0 * k..(r0 + out.len()) * k], k, &mut wt);
        out.copy_from_slice(&sums(&wt, x)[..out.len()]);
    }
    y
}

/// `Y[t] = matvec(w, X[t])` for every row `t` of `x` (`x.len() / k` tokens): `X · W^T`,
/// `[n_tokens, n]`.
pub fn matmul(w: &[f32], x: &[f32], k: usize, n: usize) -> Vec<f32> {
    let tokens = x.len().checked_div(k).unwrap_or(0);
    let mut y = vec![0f32; tokens * n];
    // LANES tokens at a time, transposed to `[k][LANES]`: each weight row is read once per
    // group and meets its LANES tokens in vector steps.
    let mut xt = vec![0f32; k * LANES];
    for t0 in (0..tokens).step_by(LANES) {
        let group = LANES.min(tokens - t0);
        transpose(&x[t0 * k..(t0 + group) * k], k, &mut xt);
        for r in 0..n {
            let acc = sums(&xt, &w[r * k..(r + 1) * k]);
            for (j, a) in acc[..group].iter().enumerate() {
                y[(t0 + j) * n + r] = *a;
            }
        }
    }
    y
}

/// `rows` (up to LANES rows of `k`) into `out[c * LANES + j]`; lanes past the rows are zero.
fn transpose(rows: &[f32], k: usize, out: &mut [f32]) {
    out.fill(0.0);
    for (j, row) in rows.chunks(k).enumerate() {
        for (c, &v) in row.iter().enumerate() {
            out[c * LANES + j] = v;
        }
    }
}

/// `acc[j] = sum_c at[c][j] * b[c]`, each in column order from -0.0.
fn sums(at: &[f32], b: &[f32]) -> [f32; LANES] {
    let mut acc = [-0.0f32; LANES];
    for (a, &bc) in at.chunks_exact(LANES).zip(b) {
        for j in 0..LANES {
            acc[j] += a[j] * bc;
        }
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-at-a-time sum the interleaved loops must reproduce bit for bit.
    fn naive(w: &[f32], x: &[f32], k: usize, n: usize) -> Vec<f32> {
        x.chunks(k)
            .flat_map(|row| {
                (0..n).map(move |r| {
                    w[r * k..(r + 1) * k]
                        .iter()
                        .zip(row)
                        .map(|(a, b)| a * b)
                        .sum::<f32>()
                })
            })
            .collect()
    }

    #[test]
    fn interleaved_sums_equal_the_one_at_a_time_sum_bit_for_bit() {
        let mut seed = 0x9e37_79b9u32;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            // Magnitudes over many octaves, so any reordered sum rounds differently.
            (seed as f32 / u32::MAX as f32 - 0.5) * 2f32.powi((seed % 24) as i32 - 12)
        };
        for (k, n, tokens) in [(1, 1, 1), (7, 9, 1), (33, 17, 3), (64, 8, 8), (29, 31, 19)] {
            let w: Vec<f32> = (0..k * n).map(|_| next()).collect();
            let x: Vec<f32> = (0..k * tokens).map(|_| next()).collect();
            let want = naive(&w, &x, k, n);
            let got = matmul(&w, &x, k, n);
            assert_eq!(
                got.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                "k {k} n {n} tokens {tokens}"
            );
            let one = matvec(&w, &x[..k], k, n);
            assert_eq!(
                one.iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                want[..n].iter().map(|v| v.to_bits()).collect::<Vec<_>>()
            );
        }
        // Products that are all -0.0 sum to -0.0 as `Iterator::sum` does.
        let (w, x) = (vec![-0.0f32; 9 * 3], vec![1.0f32; 3 * 9]);
        let bits = |v: Vec<f32>| v.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(matmul(&w, &x, 3, 9)), bits(naive(&w, &x, 3, 9)));
        assert_eq!(bits(matvec(&w, &x, 3, 9)), bits(naive(&w, &x[..3], 3, 9)));
    }
}
