//! The page's GPU device, shared by every model a page loads: each load gets a context of its
//! own on it (its buffers destroyed when the model is disposed) and finds the pipelines
//! earlier loads compiled, so loading a model again compiles nothing (`info.kernelsCompiled`).
//! The device lives as long as the page (its pipelines are small); a lost device is replaced
//! at the next load.

use crate::error::Result;
use crate::gpu::{ContextOptions, GpuContext};
use std::cell::RefCell;

thread_local! {
    /// A context holding no buffers, kept for the device and its pipeline cache.
    static DEVICE: RefCell<Option<GpuContext>> = const { RefCell::new(None) };
}

/// A new context on the page's device (requested on first use, or after the device was lost).
pub(crate) async fn context() -> Result<GpuContext> {
    let kept = DEVICE.with(|d| {
        d.borrow()
            .as_ref()
            .filter(|root| root.lost().is_none())
            .map(|root| root.sibling(ContextOptions::default()))
    });
    if let Some(ctx) = kept {
        return ctx;
    }
    let root = GpuContext::new().await?;
    let ctx = root.sibling(ContextOptions::default())?;
    DEVICE.with(|d| *d.borrow_mut() = Some(root));
    Ok(ctx)
}
