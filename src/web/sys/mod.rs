//! The browser calls the native core makes on wasm32, below it (the rest of `web` is the
//! exports above it): the clock (`performance.now()`), the browser adapter's info strings, and
//! asking `requestDevice` for the `subgroups` feature that wgpu's WebGPU backend cannot name.
//! Each has a native counterpart in the core that needs no JavaScript.

pub(crate) mod adapter_info;
pub(crate) mod clock;
pub(crate) mod subgroups;
