//! The CPU reference: each member's episode run in order on the host ([`evaluate_cpu`]), and one
//! episode step by step ([`trace_cpu`]).

use super::env::{Env, State, STATE};
use super::envs;
use super::fitness::Fitness;
use super::policy::{self, MAX_RECURRENT};
use super::spec::PopulationSpec;
use crate::error::{FuselmError, Result};
use serde::{Deserialize, Serialize};

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
        state_size: STATE as u32,
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
    mut record: impl FnMut(&State, f32, f32),
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
