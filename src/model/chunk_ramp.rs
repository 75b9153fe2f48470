//! How many decode steps the fused strategy records in each chunk (one compute pass, one
//! submit, one read of its tokens).
//!
//! The host records chunk k + 1 while the GPU runs chunk k, then waits for chunk k's tokens.
//! A chunk should be no longer than what the host can record while the GPU works through the
//! chunk before it: recording s' steps at h seconds each while the GPU runs s steps of g
//! seconds leaves the GPU idle for s'h - sg, and whatever is queued when the host stops
//! recording runs after it with nothing to hide behind. Natively the host records a step in
//! ~0.25 ms of the GPU's ~0.67 (H200, SmolLM2), so chunks can double up to the cap and stay
//! long; through Dawn in Node recording a step takes about as long as the GPU runs it
//! (~0.68 vs 0.70 ms), and chunks doubling to 32 left the GPU idle during the ramp and for the
//! whole last chunk (bench/NOTES.md, "Chunks that follow the host").
//!
//! So the ramp measures g / h as it goes. While the host recorded chunk k + 1 (R seconds for
//! s_{k+1} steps), the GPU was running chunk k (s_k steps, queued just before); the host then
//! waited W for chunk k's tokens. The GPU was busy for about R + W, so g ~ (R + W) / s_k and
//! h = R / s_{k+1}, and chunk k + 2 may be s_{k+1} g / h steps: at most twice the last one (as
//! a plain doubling would), at least `first`, at most `cap`. When the host is the bound, W is
//! only the read's latency and chunks stay near `first`; when the GPU is, they grow.

/// The chunk sizes of one fused generation.
#[derive(Debug, Clone)]
pub(crate) struct ChunkRamp {
    first: u32,
    cap: u32,
    /// The size of the next chunk to record.
    next: u32,
    /// The last recorded chunk: steps and host seconds.
    last: Option<(u32, f64)>,
}

impl ChunkRamp {
    /// Chunks of at least `first` and at most `cap` steps (`first` is clamped to `cap`).
    pub(crate) fn new(first: u32, cap: u32) -> Self {
        let cap = cap.max(1);
        let first = first.clamp(1, cap);
        Self {
            first,
            cap,
            next: first,
            last: None,
        }
    }

    /// Steps of the next chunk to record.
    pub(crate) fn next_steps(&self) -> u32 {
        self.next
    }

    /// The host recorded (and submitted) a chunk of `steps` in `seconds`.
    pub(crate) fn recorded(&mut self, steps: u32, seconds: f64) {
        self.last = Some((steps, seconds));
    }

    /// The host waited `seconds` for the tokens of a decode chunk of `steps`, which the GPU
    /// ran while the host recorded the last chunk.
    pub(crate) fn waited(&mut self, steps: u32, seconds: f64) {
        let Some((last_steps, record)) = self.last else {
            return;
        };
        let measured = record.is_finite() && record > 0.0 && seconds.is_finite() && seconds >= 0.0;
        if steps == 0 || last_steps == 0 || !measured {
            return;
        }
        // s_{k+1} g / h = s_{k+1} * ((R + W) / s_k) / (R / s_{k+1}).
        let ratio = (record + seconds) / record * f64::from(last_steps) / f64::from(steps);
        let grown = (f64::from(last_steps) * ratio.min(2.0)).floor();
        self.next = (grown.min(f64::from(self.cap)) as u32).max(self.first);
    }
}

#[cfg(test)]
mod tests {
    use super::ChunkRamp;

    /// Plays a generation: the host records a step in `h`, the GPU runs one in `g`, reading a
    /// chunk's tokens costs `lat` after it completes. Returns the chunk sizes, in order.
    fn play(h: f64, g: f64, lat: f64, tokens: u32, first: u32, cap: u32) -> Vec<u32> {
        let mut ramp = ChunkRamp::new(first, cap);
        let (mut t, mut gpu_free) = (0.0f64, 0.0f64);
        let mut sizes = Vec::new();
        // The prompt's pass: its read gives no estimate.
        let mut pending: Option<(f64, u32)> = Some((0.004, 0));
        gpu_free = gpu_free.max(0.004);
        let mut recorded = 0;
        while let Some((done, steps)) = pending.take() {
            if recorded < tokens {
                let s = ramp.next_steps().min(tokens - recorded);
                t += f64::from(s) * h;
                ramp.recorded(s, f64::from(s) * h);
                gpu_free = gpu_free.max(t) + f64::from(s) * g;
                pending = Some((gpu_free, s));
                sizes.push(s);
                recorded += s;
            }
            let wait = (done + lat - t).max(0.0);
            t += wait;
            if steps > 0 {
                ramp.waited(steps, wait);
            }
        }
        sizes
    }

    #[test]
    fn a_fast_host_ramps_up_to_the_cap() {
        // Natively: recording a step takes well under the GPU's step.
        let sizes = play(250e-6, 665e-6, 60e-6, 128, 4, 32);
        assert_eq!(&sizes[..5], &[4, 4, 8, 16, 32], "{sizes:?}");
        assert!(
            sizes[4..sizes.len() - 1].iter().all(|&s| s == 32),
            "{sizes:?}"
        );
    }

    #[test]
    fn a_host_as_slow_as_the_gpu_keeps_chunks_short() {
        // Through Dawn: recording a step takes about as long as the GPU runs it.
        for h in [675e-6, 800e-6] {
            let sizes = play(h, 700e-6, 150e-6, 128, 4, 32);
            assert!(sizes.iter().all(|&s| s <= 5), "h {h}: {sizes:?}");
        }
    }

    #[test]
    fn growth_is_at_most_doubling_and_within_bounds() {
        let mut ramp = ChunkRamp::new(4, 32);
        ramp.recorded(4, 1e-3);
        ramp.waited(4, 1.0); // a very slow GPU
        assert_eq!(ramp.next_steps(), 8);
        ramp.recorded(8, 2e-3);
        ramp.waited(8, 0.0);
        assert_eq!(ramp.next_steps(), 8);
        ramp.recorded(8, 2e-3);
        ramp.waited(32, 0.0); // the GPU ran 32 steps in the time the host recorded 8
        assert_eq!(ramp.next_steps(), 4, "never below first");
        for _ in 0..10 {
            ramp.recorded(ramp.next_steps(), 1e-3);
            ramp.waited(ramp.next_steps(), 1.0);
        }
        assert_eq!(ramp.next_steps(), 32, "never above the cap");
        // Degenerate inputs change nothing.
        ramp.recorded(0, 0.0);
        ramp.waited(4, 1.0);
        ramp.recorded(4, 0.0);
        ramp.waited(4, 1.0);
        ramp.recorded(4, 1e-3);
        ramp.waited(4, f64::NAN);
        assert_eq!(ramp.next_steps(), 32);
        assert_eq!(
            ChunkRamp::new(4, 2).next_steps(),
            2,
            "first is clamped to the cap"
        );
        assert_eq!(ChunkRamp::new(0, 0).next_steps(), 1);
    }
}
