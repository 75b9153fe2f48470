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

/// A user environment written in WGSL. The source must define three functions, which the
/// simulation kernels call (fused: all in one loop; unfused: one step per dispatch):
///
/// ```wgsl
/// // The initial state of `member`; draw randomness with sim_uniform(seed, member, slot, lo, hi)
/// // (a counter-based RNG: the same numbers on every GPU and run).
/// fn env_init(seed: u32, member: u32) -> array<f32, STATE_LEN>
/// // What the policy sees.
/// fn env_observe(s: array<f32, STATE_LEN>) -> array<f32, OBS_LEN>
/// // One step: discrete environments get the action's index as f32 (0.0, 1.0, ...), continuous
/// // ones tanh(policy output) in (-1, 1).
/// fn env_step(s: array<f32, STATE_LEN>, action: f32) -> EnvStep
/// ```
///
/// Provided to it: `struct EnvStep { s: array<f32, STATE_LEN>, reward: f32, terminated: bool }`,
/// the constants `STATE_LEN` (= `state_size`), `OBS_LEN` (= `observations`) and `PI`, and
/// `sim_uniform`, `sim_sin`, `sim_cos`, `sim_tanh` (deterministic versions of the builtins).
/// Names starting with `sim_`, `env_` (other than the three), `policy_` or `es_`, and `main`,
/// `p`, `params`, `param`, `pp`, `fitness`, `state`, `rastrigin`, `Params` are the kernels'.
/// The source may not declare bindings or entry points. It is compiled with WebGPU's runtime
/// checks (bounded loops, clamped indexing), so a bad environment cannot read outside its
/// buffers; a WGSL error comes back as `invalid-argument` with the compiler's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct CustomEnv {
    /// The WGSL source (at most 256 KiB).
    pub wgsl: String,
    /// Floats of the state (1..=16).
    pub state_size: u32,
    /// Floats of an observation (1..=16).
    pub observations: u32,
    /// Discrete actions (2..=16; the policy's largest output picks one), or absent for one
    /// continuous action, tanh(policy output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub actions: Option<u32>,
}

/// Most state floats, observations or outputs a custom environment may have.
pub const MAX_CUSTOM_LEN: u32 = 16;

impl CustomEnv {
    fn validate(&self) -> Result<()> {
        let bad = |m: String| {
            Err(FuselmError::InvalidArgument(format!(
                "custom environment: {m}"
            )))
        };
        let range = |v: u32, lo: u32, what: &str| {
            if v < lo || v > MAX_CUSTOM_LEN {
                bad(format!("{what} must be {lo}..={MAX_CUSTOM_LEN}, got {v}"))
            } else {
                Ok(())
            }
        };
        range(self.state_size, 1, "stateSize")?;
        range(self.observations, 1, "observations")?;
        if let Some(a) = self.actions {
            range(a, 2, "actions")?;
        }
        if self.wgsl.len() > 256 * 1024 {
            return bad(format!(
                "the WGSL is {} bytes; at most 256 KiB",
                self.wgsl.len()
            ));
        }
        for attr in ["@group", "@binding", "@compute", "@workgroup_size"] {
            if self.wgsl.contains(attr) {
                return bad(format!(
                    "the WGSL may not declare bindings or entry points (found `{attr}`)"
                ));
            }
        }
        let tokens: Vec<&str> = self
            .wgsl
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|t| !t.is_empty())
            .collect();
        let signatures = [
            (
                "env_init",
                "fn env_init(seed: u32, member: u32) -> array<f32, STATE_LEN>",
            ),
            (
                "env_observe",
                "fn env_observe(s: array<f32, STATE_LEN>) -> array<f32, OBS_LEN>",
            ),
            (
                "env_step",
                "fn env_step(s: array<f32, STATE_LEN>, action: f32) -> EnvStep",
            ),
        ];
        for (name, signature) in signatures {
            if !tokens.windows(2).any(|w| w == ["fn", name]) {
                return bad(format!(
                    "the WGSL must define `{signature}` ({name} is missing)"
                ));
            }
        }
        Ok(())
    }
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
            _ => envs::STATE as u32,
        }
    }

    /// Floats of the observation array in WGSL (built-ins: 8, padded).
    pub fn obs_len(&self) -> u32 {
        match self {
            Env::Custom(c) => c.observations,
            _ => envs::OBS as u32,
        }
    }

    /// Whether the CPU reference can run it (every built-in; not a custom environment).
    pub fn has_cpu_reference(&self) -> bool {
        !matches!(self, Env::Custom(_))
    }
}

/// How a member's parameters map observations to actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Policy {
    /// outputs = W obs + b (`W` row-major `[outputs, observations]`, then `b`).
    Linear,
    /// outputs = W2 tanh(W1 obs + b1) + b2, `hidden` units (W1, b1, W2, b2 in that order).
    Mlp { hidden: u32 },
    /// A recurrent (Elman) cell: h = tanh(Wx obs + Wh h_prev + b), outputs = Wo h + bo, with
    /// `hidden` units carried from step to step (zero at the episode's start); Wx, Wh, b, Wo, bo
    /// in that order.
    Recurrent { hidden: u32 },
}

/// Largest MLP hidden layer the kernels keep in registers.
pub const MAX_HIDDEN: u32 = 64;
/// Largest recurrent state (it also lives in the unfused strategy's state buffer).
pub const MAX_RECURRENT: u32 = 16;

impl Policy {
    /// The recurrent state's length (0 without one).
    pub fn recurrent_len(&self) -> u32 {
        match self {
            Policy::Recurrent { hidden } => *hidden,
            _ => 0,
        }
    }
}

impl Policy {
    /// Parameters per member for `env` (Rastrigin: its dimension).
    pub fn parameters(&self, env: &Env) -> u32 {
        let (o, a) = (env.observations(), env.outputs());
        match (env, self) {
            (Env::Rastrigin { dim }, _) => *dim,
            (_, Policy::Linear) => a * o + a,
            (_, Policy::Mlp { hidden }) => hidden * o + hidden + a * hidden + a,
            (_, Policy::Recurrent { hidden }) => {
                hidden * o + hidden * hidden + hidden + a * hidden + a
            }
        }
    }
}

/// One member's result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
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
        if let Policy::Recurrent { hidden } = self.policy {
            if hidden == 0 || hidden > MAX_RECURRENT {
                return bad(format!(
                    "recurrent policy hidden units must be 1..={MAX_RECURRENT}, got {hidden}"
                ));
            }
        }
        if let Env::Rastrigin { dim } = self.env {
            if dim == 0 || dim > 4096 {
                return bad(format!("rastrigin dim must be 1..=4096, got {dim}"));
            }
        }
        if let Env::Custom(c) = &self.env {
            c.validate()?;
        }
        Ok(())
    }

    /// [`validate`](Self::validate), and that the CPU reference can run this environment.
    pub fn validate_cpu(&self) -> Result<()> {
        self.validate()?;
        if !self.env.has_cpu_reference() {
            return Err(FuselmError::InvalidArgument(
                "a custom environment has no CPU reference: evaluate it on the GPU".into(),
            ));
        }
        Ok(())
    }

    pub fn parameters(&self) -> u32 {
        self.policy.parameters(&self.env)
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
    spec.validate_cpu()?;
    spec.check_params(params)?;
    let n = spec.parameters() as usize;
    Ok(params
        .chunks(n)
        .enumerate()
        .map(|(m, p)| episode(spec, m as u32, p))
        .collect())
}

/// One member's episode on the CPU (a custom environment's, which has no CPU reference, ends
/// at once with no reward: callers check [`PopulationSpec::validate_cpu`]).
pub fn episode(spec: &PopulationSpec, member: u32, params: &[f32]) -> Fitness {
    run_episode(spec, member, params, |_, _, _| {})
}

/// One member's episode step by step: what the CPU reference did, for showing a policy at work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct EpisodeTrace {
    /// Floats per state (4 for every built-in environment; the ones it does not use are 0).
    pub state_size: u32,
    /// The states, the initial one first: (steps + 1) × `state_size` floats. CartPole: x,
    /// x_dot, theta, theta_dot; Acrobot: theta1, theta2, dtheta1, dtheta2; MountainCar:
    /// position, velocity; Pendulum: theta, theta_dot.
    pub states: Vec<f32>,
    /// The action of each step (a discrete action's index, or the continuous value).
    pub actions: Vec<f32>,
    /// The reward of each step.
    pub rewards: Vec<f32>,
    pub fitness: Fitness,
}

/// The trace of `member`'s episode with its parameters `params` (one member's), on the CPU.
pub fn trace_cpu(spec: &PopulationSpec, member: u32, params: &[f32]) -> Result<EpisodeTrace> {
    spec.validate_cpu()?;
    if params.len() != spec.parameters() as usize {
        return Err(FuselmError::InvalidArgument(format!(
            "params: expected one member's {} parameters, got {}",
            spec.parameters(),
            params.len()
        )));
    }
    let mut states = envs::init(&spec.env, spec.seed, member).to_vec();
    let (mut actions, mut rewards) = (Vec::new(), Vec::new());
    let fitness = run_episode(spec, member, params, |state, action, reward| {
        states.extend_from_slice(state);
        actions.push(action);
        rewards.push(reward);
    });
    Ok(EpisodeTrace {
        state_size: envs::STATE as u32,
        states,
        actions,
        rewards,
        fitness,
    })
}

/// The CPU episode loop; `record(next state, action, reward)` sees every step.
fn run_episode(
    spec: &PopulationSpec,
    member: u32,
    params: &[f32],
    mut record: impl FnMut(&envs::State, f32, f32),
) -> Fitness {
    if !spec.env.has_cpu_reference() {
        return Fitness {
            total_reward: 0.0,
            steps: 0,
        };
    }
    if let Env::Rastrigin { .. } = spec.env {
        return Fitness {
            total_reward: -envs::rastrigin(params),
            steps: 1,
        };
    }
    let mut state = envs::init(&spec.env, spec.seed, member);
    let mut memory = [0f32; MAX_RECURRENT as usize];
    let mut total = 0.0f32;
    let mut steps = 0;
    for _ in 0..spec.episode_length {
        let obs = envs::observe(&spec.env, &state);
        let action = policy::act(spec.policy, &spec.env, params, &obs, &mut memory);
        let s = envs::step(&spec.env, &state, action);
        record(&s.state, action, s.reward);
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
