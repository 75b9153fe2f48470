//! A monotonic wall clock that works natively (`std::time::Instant`) and in browsers
//! (`performance.now()`: `web::sys::clock`), returning seconds as f64.

#[cfg(not(target_arch = "wasm32"))]
pub fn now_seconds() -> f64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    EPOCH.get_or_init(Instant::now).elapsed().as_secs_f64()
}

#[cfg(target_arch = "wasm32")]
pub use crate::web::sys::clock::now_seconds;
