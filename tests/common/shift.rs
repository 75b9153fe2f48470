//! The plain CPU reference's side of the context-shift tests (tests/context_shift.rs natively,
//! tests/model_synthetic.rs in Chromium): greedy ids past nCtx, shifting as the GPU does.

use fuselm::model::{tokens_to_drop, CpuReferenceModel};

/// What the CPU reference generated past nCtx: ids, each step's top-2 margin, tokens dropped.
pub struct Shifted {
    pub prompt: Vec<u32>,
    pub ids: Vec<u32>,
    pub margins: Vec<f32>,
    pub dropped: u32,
}

impl Shifted {
    /// Ids the exact rule compares: up to the first margin below 0.01.
    pub fn exact(&self) -> usize {
        self.margins
            .iter()
            .position(|&m| m < 0.01)
            .unwrap_or(self.ids.len())
    }
}

/// A 16-token prompt of printable bytes.
pub fn prompt(salt: u32) -> Vec<u32> {
    (0..16u32).map(|i| 32 + (i * 7 + salt) % 90).collect()
}

/// Greedy ids of `cpu` after `prompt`, `n` of them in a context of `n_ctx` keeping `keep`;
/// None at a near tie (margin < 0.01) among the first `clean` ids.
fn cpu_shifted_clean(
    cpu: &mut CpuReferenceModel,
    prompt: &[u32],
    n: usize,
    keep: u32,
    n_ctx: u32,
    clean: usize,
) -> Option<Shifted> {
    let vocab = cpu.config.vocab_size as usize;
    cpu.reset();
    let mut logits = cpu.forward(prompt).unwrap();
    let mut seq = prompt.to_vec();
    let (mut ids, mut margins, mut dropped) = (Vec::new(), Vec::new(), 0);
    while ids.len() < n {
        let last = &logits[logits.len() - vocab..];
        let mut ranked: Vec<(f32, u32)> = last
            .iter()
            .enumerate()
            .map(|(i, &v)| (v, i as u32))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        margins.push(ranked[0].0 - ranked[1].0);
        if ids.len() < clean && ranked[0].0 - ranked[1].0 < 0.01 {
            return None;
        }
        let next = ranked[0].1;
        ids.push(next);
        seq.push(next);
        if ids.len() == n {
            break;
        }
        if seq.len() as u32 >= n_ctx {
            let drop = tokens_to_drop(seq.len() as u32, keep, 1, n_ctx).unwrap();
            // The cache holds every token but `next`.
            cpu.shift_context(keep as usize, drop as usize);
            seq.drain(keep as usize..(keep + drop) as usize);
            dropped += drop;
        }
        logits = cpu.forward(&[next]).unwrap();
    }
    Some(Shifted {
        prompt: prompt.to_vec(),
        ids,
        margins,
        dropped,
    })
}

/// The first prompt (of 16 salts) whose reference continuation has no near tie in its first
/// `clean` ids (random weights tie often; the comparison must reach past the shifts).
pub fn clean_prompt(
    cpu: &mut CpuReferenceModel,
    n: usize,
    keep: u32,
    n_ctx: u32,
    clean: usize,
) -> Shifted {
    (0..16)
        .find_map(|salt| cpu_shifted_clean(cpu, &prompt(salt), n, keep, n_ctx, clean))
        .expect("a prompt of 16 without a near tie")
}
