//! The page's GPU device, shared by every model a page loads: each load gets a context of its
//! own on it (its buffers destroyed when the model is disposed) and finds the pipelines
//! earlier loads compiled, so loading a model again compiles nothing (`info.kernelsCompiled`).
//! The device lives as long as the page (its pipelines are small); a lost device is replaced
//! at the next load.

use crate::error::Result;
use crate::gpu::{ContextOptions, GpuContext};
use crate::model::TextModel;
use std::cell::{Cell, RefCell};
use std::rc::{Rc, Weak};

thread_local! {
    /// A context holding no buffers, kept for the device and its pipeline cache.
    static DEVICE: RefCell<Option<GpuContext>> = const { RefCell::new(None) };
    /// The models loaded on the device and not yet disposed, each with the bytes it held when
    /// last seen idle (a generating model is borrowed; its memory cannot change meanwhile
    /// except by a megakernel's first build, counted once the generation ends).
    static MODELS: RefCell<Vec<Loaded>> = const { RefCell::new(Vec::new()) };
    /// Estimates of the loads past their header and not yet finished (see [`Reservation`]).
    static RESERVED: Cell<u64> = const { Cell::new(0) };
}

/// A load's estimate counted in [`in_use`] from its header until it finishes or fails, so that
/// loads running at once are held to one budget.
pub(crate) struct Reservation(u64);

impl Reservation {
    pub(crate) fn new(bytes: u64) -> Self {
        RESERVED.with(|r| r.set(r.get() + bytes));
        Self(bytes)
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        RESERVED.with(|r| r.set(r.get().saturating_sub(self.0)));
    }
}

/// A model counted in [`in_use`]: gone once every `Rc` of it is dropped.
struct Loaded {
    model: Weak<RefCell<TextModel>>,
    /// Its bytes when last seen idle.
    held: Cell<u64>,
}

/// Counts `model` in [`in_use`] until it is dropped (disposed).
pub(crate) fn register(model: &Rc<RefCell<TextModel>>) {
    let held = model
        .try_borrow_mut()
        .map(|mut m| m.gpu().memory().total)
        .unwrap_or(0);
    MODELS.with(|m| {
        m.borrow_mut().push(Loaded {
            model: Rc::downgrade(model),
            held: Cell::new(held),
        })
    });
}

/// GPU bytes held by the page's models, with the estimates of the loads under way (this
/// thread's: a worker has a device of its own).
pub(crate) fn in_use() -> u64 {
    RESERVED.with(Cell::get) + held()
}

/// GPU bytes held by the page's loaded models.
fn held() -> u64 {
    MODELS.with(|models| {
        let mut models = models.borrow_mut();
        models.retain(|m| m.model.strong_count() > 0);
        models
            .iter()
            .map(|m| {
                if let Some(now) = m.model.upgrade().and_then(|model| {
                    let mut model = model.try_borrow_mut().ok()?;
                    Some(model.gpu().memory().total)
                }) {
                    m.held.set(now);
                }
                m.held.get()
            })
            .sum()
    })
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
