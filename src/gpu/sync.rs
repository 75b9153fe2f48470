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
