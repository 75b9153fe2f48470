//! Greedy choice of a token: the index of the largest logit.

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
