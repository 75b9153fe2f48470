//! Policies: a member's flat parameters turn an observation into an action (CPU reference of
//! `shaders/sim_policy.wgsl`, same order of operations).

use super::envs::Obs;
use super::math::tanh;
use super::{Env, Policy, MAX_CUSTOM_LEN, MAX_HIDDEN};

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
