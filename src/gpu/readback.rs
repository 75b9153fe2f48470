//! Reading GPU buffers back to the host, the same way natively and in browsers.
//!
//! Natively `device.poll(wait)` drives the map callback; in a browser the callback fires from the
//! event loop, so we await a oneshot channel either way.

use crate::error::{FuselmError, Result};

/// Copies `size` bytes at `offset` of `src` (which needs COPY_SRC) into a staging buffer and
/// returns them. `offset` and `size` must be multiples of 4.
pub async fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    src: &wgpu::Buffer,
    offset: u64,
    size: u64,
) -> Result<Vec<u8>> {
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("fuselm readback"),
        size,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let mut encoder = device.create_command_encoder(&Default::default());
    encoder.copy_buffer_to_buffer(src, offset, &staging, 0, size);
    queue.submit([encoder.finish()]);
    let mapped = map_read(device, &staging).await;
    let bytes = mapped.and_then(|()| {
        let bytes = staging
            .get_mapped_range(..)
            .map_err(|e| FuselmError::Gpu(format!("readback: {e}")))?
            .to_vec();
        staging.unmap();
        Ok(bytes)
    });
    // Freed now, not when a browser's garbage collector gets to the JS object.
    staging.destroy();
    bytes
}

/// Maps a MAP_READ buffer and waits until the map completes (or fails).
pub(crate) async fn map_read(device: &wgpu::Device, buffer: &wgpu::Buffer) -> Result<()> {
    map_read_after(device, buffer, None).await
}

/// [`map_read`] that natively waits only for `submission` (else for everything submitted).
async fn map_read_after(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    submission: Option<wgpu::SubmissionIndex>,
) -> Result<()> {
    let (tx, rx) = futures_channel::oneshot::channel();
    buffer.map_async(wgpu::MapMode::Read, .., move |r| {
        let _ = tx.send(r);
    });
    #[cfg(not(target_arch = "wasm32"))]
    device
        .poll(wgpu::PollType::Wait {
            submission_index: submission,
            timeout: None,
        })
        .map_err(|e| FuselmError::Gpu(format!("poll: {e}")))?;
    #[cfg(target_arch = "wasm32")]
    let _ = submission;
    #[cfg(target_arch = "wasm32")]
    let _ = device;
    match rx.await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(FuselmError::Gpu(format!("buffer map failed: {e}"))),
        Err(_) => Err(FuselmError::Gpu(
            "buffer map callback dropped (device lost?)".into(),
        )),
    }
}

/// A copy into a staging buffer recorded into the caller's encoder, read once the submission
/// that carries it has run — so a readback can ride along with the work that produces the
/// data, and the host can queue more work before waiting for it. The staging buffer is
/// destroyed when the read is dropped (read or not): in browsers a dropped wgpu buffer would
/// otherwise hold its GPU memory until garbage collection (one vocabulary of logits per token
/// for the unfused strategy).
pub struct StagedRead {
    staging: wgpu::Buffer,
    submission: Option<wgpu::SubmissionIndex>,
}

impl Drop for StagedRead {
    fn drop(&mut self) {
        self.staging.destroy();
    }
}

impl StagedRead {
    /// Records a copy of `size` bytes at `offset` of `src` (multiples of 4).
    pub fn copy(
        device: &wgpu::Device,
        encoder: &mut wgpu::CommandEncoder,
        src: &wgpu::Buffer,
        offset: u64,
        size: u64,
    ) -> Self {
        let staging = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("fuselm staged readback"),
            size: size.max(4),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        encoder.copy_buffer_to_buffer(src, offset, &staging, 0, size);
        Self {
            staging,
            submission: None,
        }
    }

    /// The submission that carries the copy: natively, reading waits for that submission only,
    /// not for work queued after it.
    pub fn submitted(mut self, index: wgpu::SubmissionIndex) -> Self {
        self.submission = Some(index);
        self
    }

    /// Waits for the copy (submit it first) and returns the bytes.
    pub async fn read(mut self, device: &wgpu::Device) -> Result<Vec<u8>> {
        let submission = self.submission.take();
        map_read_after(device, &self.staging, submission).await?;
        let bytes = self
            .staging
            .get_mapped_range(..)
            .map_err(|e| FuselmError::Gpu(format!("readback: {e}")))?
            .to_vec();
        self.staging.unmap();
        Ok(bytes)
    }
}
