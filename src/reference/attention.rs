//! Causal grouped-query attention.

use super::softmax::softmax;

/// Attention of one token's queries `q` (`[n_head, head_dim]`) over `seq = keys.len() /
/// (n_head_kv * head_dim)` visible positions; `keys`, `values`: `[seq, n_head_kv, head_dim]`.
/// Query head `h` uses KV head `h / (n_head / n_head_kv)`; scores are scaled by
/// `1 / sqrt(head_dim)`. Returns `[n_head, head_dim]`.
pub fn attention(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    n_head: usize,
    n_head_kv: usize,
    head_dim: usize,
) -> Vec<f32> {
    let scale = 1.0 / (head_dim as f32).sqrt();
    attention_scaled(q, keys, values, n_head, n_head_kv, head_dim, scale)
}

/// [`attention`] with scores scaled by `scale`.
pub fn attention_scaled(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    n_head: usize,
    n_head_kv: usize,
    head_dim: usize,
    scale: f32,
) -> Vec<f32> {
    let kv_row = n_head_kv * head_dim;
    let seq = keys.len() / kv_row.max(1);
    let group = n_head / n_head_kv.max(1);
    let mut out = vec![0.0; n_head * head_dim];
    for h in 0..n_head {
        let qh = &q[h * head_dim..(h + 1) * head_dim];
        let kv = (h / group) * head_dim;
        let scores: Vec<f32> = (0..seq)
            .map(|p| {
                let kp = &keys[p * kv_row + kv..p * kv_row + kv + head_dim];
                qh.iter().zip(kp).map(|(a, b)| a * b).sum::<f32>() * scale
            })
            .collect();
        let probs = softmax(&scores);
        let o = &mut out[h * head_dim..(h + 1) * head_dim];
        for (p, w) in probs.iter().enumerate() {
            let vp = &values[p * kv_row + kv..p * kv_row + kv + head_dim];
            for (od, vd) in o.iter_mut().zip(vp) {
                *od += w * vd;
            }
        }
    }
    out
}

/// Causal attention for a step of tokens starting at position `pos0`: token `t` of `q`
/// (`[n_tokens, n_head, head_dim]`) sees positions `0..=pos0 + t` of `keys`/`values`
/// (`[>= pos0 + n_tokens, n_head_kv, head_dim]`, the cache including this step's rows).
pub fn causal_attention(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    pos0: usize,
    n_head: usize,
    n_head_kv: usize,
    head_dim: usize,
) -> Vec<f32> {
    let shape = AttentionShape {
        n_head,
        n_head_kv,
        head_dim,
        scale: 1.0 / (head_dim as f32).sqrt(),
        window: None,
    };
    windowed_attention(q, keys, values, pos0, &shape)
}

/// Heads, scale and window of [`windowed_attention`].
#[derive(Debug, Clone, Copy)]
pub struct AttentionShape {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim: usize,
    pub scale: f32,
    /// Sliding window: a query at position p sees keys at positions p - window < j <= p.
    pub window: Option<usize>,
}

/// [`causal_attention`] with any score scale and an optional sliding window.
pub fn windowed_attention(
    q: &[f32],
    keys: &[f32],
    values: &[f32],
    pos0: usize,
    s: &AttentionShape,
) -> Vec<f32> {
    let kv_row = s.n_head_kv * s.head_dim;
    q.chunks(s.n_head * s.head_dim)
        .enumerate()
        .flat_map(|(t, qt)| {
            let end = pos0 + t + 1;
            let start = s.window.map_or(0, |w| end.saturating_sub(w));
            attention_scaled(
                qt,
                &keys[start * kv_row..end * kv_row],
                &values[start * kv_row..end * kv_row],
                s.n_head,
                s.n_head_kv,
                s.head_dim,
                s.scale,
            )
        })
        .collect()
}
