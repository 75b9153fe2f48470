//! Policies: how a member's parameters map observations to actions ([`Policy`]), and their CPU
//! reference ([`act`], `shaders/sim_policy.wgsl` in the same order of operations).

use super::custom_env::MAX_CUSTOM_LEN;
use super::env::{Env, Obs};
use super::math::tanh;
use serde::{Deserialize, Serialize};

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

/// The action for `obs`: the index of the largest output (lowest on ties) for discrete
/// environments, else `action_scale` × tanh(output) (Pendulum's torque: 2 tanh). `memory` is a
/// recurrent policy's state (its first `hidden` floats; zero at the episode's start), updated.
pub fn act(policy: Policy, env: &Env, params: &[f32], obs: &Obs, memory: &mut [f32]) -> f32 {
    let (o, a) = (env.observations() as usize, env.outputs() as usize);
    let mut out = [0f32; MAX_CUSTOM_LEN as usize];
    match policy {
        Policy::Linear => layer(params, &obs[..o], &mut out[..a]),
        Policy::Mlp { hidden } => {
            let h = hidden as usize;
            let mut hid = [0f32; MAX_HIDDEN as usize];
            layer(params, &obs[..o], &mut hid[..h]);
            for v in &mut hid[..h] {
                *v = tanh(*v);
            }
            layer(&params[h * o + h..], &hid[..h], &mut out[..a]);
        }
        Policy::Recurrent { hidden } => {
            // acc = Wx obs, then + Wh h_prev, then + b, in that order (as the WGSL).
            let h = hidden as usize;
            let (wx, wh, b) = (
                &params[..h * o],
                &params[h * o..h * o + h * h],
                &params[h * o + h * h..],
            );
            let mut next = [0f32; MAX_HIDDEN as usize];
            for (r, y) in next[..h].iter_mut().enumerate() {
                let mut acc = 0.0f32;
                for (j, xv) in obs[..o].iter().enumerate() {
                    acc += wx[r * o + j] * xv;
                }
                for (j, hv) in memory[..h].iter().enumerate() {
                    acc += wh[r * h + j] * hv;
                }
                *y = tanh(acc + b[r]);
            }
            memory[..h].copy_from_slice(&next[..h]);
            layer(&params[h * o + h * h + h..], &memory[..h], &mut out[..a]);
        }
    }
    if env.discrete() {
        let mut best = 0;
        for i in 1..a {
            if out[i] > out[best] {
                best = i;
            }
        }
        best as f32
    } else {
        env.action_scale() * tanh(out[0])
    }
}

/// out = W x + b with W `[out.len(), x.len()]` row-major at the start of `p`, then b.
fn layer(p: &[f32], x: &[f32], out: &mut [f32]) {
    let (n, k) = (out.len(), x.len());
    for (r, y) in out.iter_mut().enumerate() {
        let mut acc = 0.0f32;
        for (j, xv) in x.iter().enumerate() {
            acc += p[r * k + j] * xv;
        }
        *y = acc + p[n * k + r];
    }
}
