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
//!
//! Randomness (initial states) is counter-based ([`math::uniform`]: a pure function of seed,
//! member and slot), so the CPU and every GPU draw the same numbers.

pub mod bench;
pub mod envs;
pub mod es;
pub mod gpu;
pub mod math;
pub mod policy;

use crate::error::{FuselmError, Result};
use serde::{Deserialize, Serialize};

/// A built-in environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
        }
    }

    /// Policy outputs: one per discrete action (argmax picks it), or 1 for Pendulum's torque.
    pub fn outputs(&self) -> u32 {
        match self {
            Env::CartPole => 2,
            Env::Acrobot | Env::MountainCar => 3,
            Env::Pendulum => 1,
            Env::Rastrigin { .. } => 0,
        }
    }

    /// Whether the action is an index (argmax of the outputs) rather than a value.
    pub fn discrete(&self) -> bool {
        !matches!(self, Env::Pendulum | Env::Rastrigin { .. })
    }
}

/// How a member's parameters map observations to actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Policy {
    /// outputs = W obs + b (`W` row-major `[outputs, observations]`, then `b`).
    Linear,
    /// outputs = W2 tanh(W1 obs + b1) + b2, `hidden` units (W1, b1, W2, b2 in that order).
    Mlp { hidden: u32 },
}

/// Largest MLP hidden layer the kernels keep in registers.
pub const MAX_HIDDEN: u32 = 64;

impl Policy {
    /// Parameters per member for `env` (Rastrigin: its dimension).
    pub fn parameters(&self, env: Env) -> u32 {
        let (o, a) = (env.observations(), env.outputs());
        match (env, self) {
            (Env::Rastrigin { dim }, _) => dim,
            (_, Policy::Linear) => a * o + a,
            (_, Policy::Mlp { hidden }) => hidden * o + hidden + a * hidden + a,
        }
    }
}

/// One member's result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fitness {
    /// Sum of the rewards, in step order (f32).
    pub total_reward: f32,
    /// Steps taken before termination or the episode's end.
    pub steps: u32,
}

/// What to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct PopulationSpec {
    pub env: Env,
    pub policy: Policy,
    /// Members.
    pub population: u32,
    /// Steps per episode at most.
    pub episode_length: u32,
    /// Seed of the initial states.
    pub seed: u32,
}

impl PopulationSpec {
    /// Checks the settings; the error names what is wrong.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(FuselmError::InvalidArgument(m));
        if self.population == 0 {
            return bad("population must be at least 1".into());
        }
        if self.episode_length == 0 && !matches!(self.env, Env::Rastrigin { .. }) {
            return bad("episodeLength must be at least 1".into());
        }
        if let Policy::Mlp { hidden } = self.policy {
            if hidden == 0 || hidden > MAX_HIDDEN {
                return bad(format!(
                    "policy hidden units must be 1..={MAX_HIDDEN}, got {hidden}"
                ));
            }
        }
        if let Env::Rastrigin { dim } = self.env {
            if dim == 0 || dim > 4096 {
                return bad(format!("rastrigin dim must be 1..=4096, got {dim}"));
            }
        }
        Ok(())
    }

    pub fn parameters(&self) -> u32 {
        self.policy.parameters(self.env)
    }

    /// Checks that `params` holds `population × parameters()` finite-or-not floats.
    pub fn check_params(&self, params: &[f32]) -> Result<()> {
        let want = u64::from(self.population) * u64::from(self.parameters());
        if params.len() as u64 != want {
            return Err(FuselmError::InvalidArgument(format!(
                "params: expected population × parameters = {} × {} = {want} floats, got {}",
                self.population,
                self.parameters(),
                params.len()
            )));
        }
        Ok(())
    }
}

/// The CPU reference: every member's episode, in order.
pub fn evaluate_cpu(spec: &PopulationSpec, params: &[f32]) -> Result<Vec<Fitness>> {
    spec.validate()?;
    spec.check_params(params)?;
    let n = spec.parameters() as usize;
    Ok(params
        .chunks(n)
        .enumerate()
        .map(|(m, p)| episode(spec, m as u32, p))
        .collect())
}

/// One member's episode on the CPU.
pub fn episode(spec: &PopulationSpec, member: u32, params: &[f32]) -> Fitness {
    if let Env::Rastrigin { .. } = spec.env {
        return Fitness {
            total_reward: -envs::rastrigin(params),
            steps: 1,
        };
    }
    let mut state = envs::init(spec.env, spec.seed, member);
    let mut total = 0.0f32;
    let mut steps = 0;
    for _ in 0..spec.episode_length {
        let obs = envs::observe(spec.env, &state);
        let action = policy::act(spec.policy, spec.env, params, &obs);
        let s = envs::step(spec.env, &state, action);
        total += s.reward;
        steps += 1;
        state = s.state;
        if s.terminated {
            break;
        }
    }
    Fitness {
        total_reward: total,
        steps,
    }
}
