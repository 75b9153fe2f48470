//! Which environment a population runs ([`Env`]): what each needs of a policy, and the padded
//! state and observation sizes of the built-in ones.

use super::custom_env::CustomEnv;
use serde::{Deserialize, Serialize};

/// Floats of an environment state (padded).
pub const STATE: usize = 4;
/// Floats of an observation (padded).
pub const OBS: usize = 8;

pub type State = [f32; STATE];
pub type Obs = [f32; OBS];

/// An environment: built in, or the user's own WGSL ([`CustomEnv`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "kebab-case", tag = "name")]
pub enum Env {
    /// CartPole-v1: 4 observations, 2 actions, +1 per step until the pole falls.
    CartPole,
    /// Acrobot-v1: 6 observations, 3 actions (torque -1, 0, +1), -1 per step until the tip
    /// swings above the bar.
    Acrobot,
    /// MountainCar-v0: 2 observations, 3 actions, -1 per step until the car reaches the flag.
    MountainCar,
    /// Pendulum-v1: 3 observations, a continuous torque in [-2, 2] (2 tanh of the policy's
    /// output), reward -(angle² + 0.1 speed² + 0.001 torque²), no termination.
    Pendulum,
    /// The Rastrigin function in `dim` dimensions: each member's parameters are the point;
    /// fitness is -f(x), one evaluation (no policy, no steps).
    Rastrigin { dim: u32 },
    /// The user's environment: WGSL functions with the signatures [`CustomEnv`] documents,
    /// compiled into the same kernels as the built-in ones (GPU only: it has no CPU reference).
    Custom(CustomEnv),
}

impl Env {
    /// Observation floats the policy sees.
    pub fn observations(&self) -> u32 {
        match self {
            Env::CartPole => 4,
            Env::Acrobot => 6,
            Env::MountainCar => 2,
            Env::Pendulum => 3,
            Env::Rastrigin { .. } => 0,
            Env::Custom(c) => c.observations,
        }
    }

    /// Policy outputs: one per discrete action (argmax picks it), or 1 for Pendulum's torque.
    pub fn outputs(&self) -> u32 {
        match self {
            Env::CartPole => 2,
            Env::Acrobot | Env::MountainCar => 3,
            Env::Pendulum => 1,
            Env::Rastrigin { .. } => 0,
            Env::Custom(c) => c.actions.unwrap_or(1),
        }
    }

    /// Whether the action is an index (argmax of the outputs) rather than a value.
    pub fn discrete(&self) -> bool {
        match self {
            Env::Pendulum | Env::Rastrigin { .. } => false,
            Env::Custom(c) => c.actions.is_some(),
            _ => true,
        }
    }

    /// A continuous action is this × tanh(output) (Pendulum's torque range is ±2).
    pub fn action_scale(&self) -> f32 {
        match self {
            Env::Pendulum => 2.0,
            _ => 1.0,
        }
    }

    /// Floats of the state the kernels carry (built-ins: 4, padded).
    pub fn state_len(&self) -> u32 {
        match self {
            Env::Custom(c) => c.state_size,
            _ => STATE as u32,
        }
    }

    /// Floats of the observation array in WGSL (built-ins: 8, padded).
    pub fn obs_len(&self) -> u32 {
        match self {
            Env::Custom(c) => c.observations,
            _ => OBS as u32,
        }
    }

    /// Whether the CPU reference can run it (every built-in; not a custom environment).
    pub fn has_cpu_reference(&self) -> bool {
        !matches!(self, Env::Custom(_))
    }
}
