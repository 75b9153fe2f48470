//! Waiting for submitted GPU work, natively and in browsers.

use crate::error::{FuselmError, Result};

/// Resolves once everything submitted to `queue` so far has finished on the GPU.
pub async fn wait_idle(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<()> {
    let (tx, rx) = futures_channel::oneshot::channel();
    queue.on_submitted_work_done(move || {
        let _ = tx.send(());
    });
    #[cfg(not(target_arch = "wasm32"))]
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| FuselmError::Gpu(format!("poll: {e}")))?;
    #[cfg(target_arch = "wasm32")]
    let _ = device;
    rx.await
        .map_err(|_| FuselmError::Gpu("queue completion callback dropped (device lost?)".into()))
}

/// One submission's completion, to await after more work has been queued behind it.
#[derive(Debug)]
pub struct Submitted {
    index: wgpu::SubmissionIndex,
    done: futures_channel::oneshot::Receiver<()>,
}

impl Submitted {
    /// Tracks the submission `index` (call right after `queue.submit`, before anything else is
    /// submitted: the queue's completion callback covers everything submitted so far).
    pub fn track(queue: &wgpu::Queue, index: wgpu::SubmissionIndex) -> Self {
        let (tx, done) = futures_channel::oneshot::channel();
        queue.on_submitted_work_done(move || {
            let _ = tx.send(());
        });
        Self { index, done }
    }

    /// Resolves once the submission has finished on the GPU (natively by polling up to it; in
    /// a browser the callback arrives through the event loop, which runs meanwhile).
    pub async fn wait(self, device: &wgpu::Device) -> Result<()> {
        #[cfg(not(target_arch = "wasm32"))]
        device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(self.index),
                timeout: None,
            })
            .map_err(|e| FuselmError::Gpu(format!("poll: {e}")))?;
        #[cfg(target_arch = "wasm32")]
        let _ = (device, self.index);
        self.done.await.map_err(|_| {
            FuselmError::Gpu("queue completion callback dropped (device lost?)".into())
        })
    }
}
