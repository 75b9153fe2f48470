//! Fused sequential simulation: a population of policies, each driven through a whole episode
//! of a built-in environment, evaluated on the GPU — with one dispatch per step (`unfused`, as
//! frameworks do) or one dispatch for the whole episode of the whole population (`fused`: every
//! step loops inside the shader). Same idea as fused generation: at small per-step work the
//! per-dispatch cost dominates, so the loop moves onto the GPU.
//!
//! - [`envs`]: the environments' CPU reference (Gym's CartPole-v1, Acrobot-v1 with RK4,
//!   MountainCar-v0, Pendulum-v1, and the Rastrigin function), op for op like the WGSL.
//! - [`policy`]: linear and tanh-MLP policies over a flat parameter vector per member.
//! - [`gpu`]: the kernels' host side ([`gpu::PopulationEvaluator`]).
//! - `env` ([`Env`]), `custom_env` ([`CustomEnv`]), `spec` ([`PopulationSpec`]), `fitness`
//!   ([`Fitness`]) and `cpu` ([`evaluate_cpu`], [`trace_cpu`]): what to evaluate, what comes
//!   back, and the CPU reference that runs it; this file only declares and re-exports them.
//!
//! Randomness (initial states) is counter-based ([`math::uniform`]: a pure function of seed,
//! member and slot), so the CPU and every GPU draw the same numbers.

pub mod bench;
mod cpu;
mod custom_env;
mod env;
pub mod envs;
pub mod es;
mod fitness;
pub mod gpu;
pub mod math;
pub mod policy;
mod spec;

pub use cpu::{episode, evaluate_cpu, trace_cpu, EpisodeTrace};
pub use custom_env::{CustomEnv, MAX_CUSTOM_LEN};
pub use env::Env;
pub use fitness::Fitness;
pub use policy::{Policy, MAX_HIDDEN, MAX_RECURRENT};
pub use spec::PopulationSpec;
