//! The JS facade: the only module that knows about wasm-bindgen, compiled only for wasm32.
//!
//! Each export is a thin async wrapper over the native core; `sys` holds the few browser calls
//! the core itself makes on wasm32 (clock, adapter info, the subgroups request). Values cross the boundary as tsify
//! `Ts<T>` (typed in the `.d.ts`, converted inside the function so nothing leaks on error).
//! Errors cross as JS `Error` objects named `FuselmError` carrying a stable `kind` (see
//! [`crate::FuselmError::kind`]); `js/errors.ts` turns them into the npm package's `FuselmError` class.
//! The conversions are in `convert.rs`, the exports in files of their own; this file only
//! declares and re-exports them.

mod bench;
mod convert;
mod device;
mod load;
mod model;
mod probe;
mod sim;
pub(crate) mod sys;

pub use bench::bench_js;
pub use load::{create_model_loader, load_model, ModelLoader};
pub use model::{Model, ModelInfo};
pub use probe::probe_js;
pub use sim::{create_simulation, sim_bench_js, Simulation};
