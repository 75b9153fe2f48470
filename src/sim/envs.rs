//! The built-in environments' CPU reference: Gym's definitions (CartPole-v1, Acrobot-v1 with
//! RK4 and the "book" dynamics, MountainCar-v0, Pendulum-v1) in f32, in the order of operations
//! of their WGSL twins (`shaders/sim_env_*.wgsl`), with this module's `math` for sin/cos/tanh.
//! State and observation are padded to [`STATE`] and [`OBS`] floats.

use super::env::Env;
use super::math::{cos, sin, sincos, uniform_in, PI};

pub use super::env::{Obs, State, OBS, STATE};

/// The outcome of one step.
pub struct Step {
    pub state: State,
    pub reward: f32,
    pub terminated: bool,
}

/// The initial state of `member` (draws at slots 0..STATE).
pub fn init(env: &Env, seed: u32, member: u32) -> State {
    let u = |slot: u32, lo: f32, hi: f32| uniform_in(seed, member, slot, lo, hi);
    match env {
        Env::CartPole => [
            u(0, -0.05, 0.05),
            u(1, -0.05, 0.05),
            u(2, -0.05, 0.05),
            u(3, -0.05, 0.05),
        ],
        Env::Acrobot => [
            u(0, -0.1, 0.1),
            u(1, -0.1, 0.1),
            u(2, -0.1, 0.1),
            u(3, -0.1, 0.1),
        ],
        Env::MountainCar => [u(0, -0.6, -0.4), 0.0, 0.0, 0.0],
        Env::Pendulum => [u(0, -PI, PI), u(1, -1.0, 1.0), 0.0, 0.0],
        Env::Rastrigin { .. } | Env::Custom(_) => [0.0; STATE],
    }
}

/// What the policy sees.
pub fn observe(env: &Env, s: &State) -> Obs {
    let mut o = [0.0; OBS];
    match env {
        Env::CartPole => o[..4].copy_from_slice(s),
        Env::Acrobot => {
            let (s1, c1) = sincos(s[0]);
            let (s2, c2) = sincos(s[1]);
            o[..6].copy_from_slice(&[c1, s1, c2, s2, s[2], s[3]]);
        }
        Env::MountainCar => o[..2].copy_from_slice(&s[..2]),
        Env::Pendulum => {
            let (st, ct) = sincos(s[0]);
            o[..3].copy_from_slice(&[ct, st, s[1]]);
        }
        Env::Rastrigin { .. } | Env::Custom(_) => {}
    }
    o
}

/// One step with `action` (a discrete action's index as f32, or Pendulum's torque).
pub fn step(env: &Env, s: &State, action: f32) -> Step {
    match env {
        Env::CartPole => cartpole(s, action),
        Env::Acrobot => acrobot(s, action),
        Env::MountainCar => mountain_car(s, action),
        Env::Pendulum => pendulum(s, action),
        Env::Rastrigin { .. } | Env::Custom(_) => Step {
            state: *s,
            reward: 0.0,
            terminated: true,
        },
    }
}

fn cartpole(s: &State, action: f32) -> Step {
    const GRAVITY: f32 = 9.8;
    const MASSPOLE: f32 = 0.1;
    const TOTAL_MASS: f32 = 1.1;
    const LENGTH: f32 = 0.5;
    const POLEMASS_LENGTH: f32 = 0.05;
    const TAU: f32 = 0.02;
    const THETA_LIMIT: f32 = 12.0 * 2.0 * PI / 360.0;
    let [x, x_dot, theta, theta_dot] = *s;
    let force = if action >= 1.0 { 10.0 } else { -10.0 };
    let (sintheta, costheta) = sincos(theta);
    let temp = (force + POLEMASS_LENGTH * theta_dot * theta_dot * sintheta) / TOTAL_MASS;
    let thetaacc = (GRAVITY * sintheta - costheta * temp)
        / (LENGTH * (4.0 / 3.0 - MASSPOLE * costheta * costheta / TOTAL_MASS));
    let xacc = temp - POLEMASS_LENGTH * thetaacc * costheta / TOTAL_MASS;
    let state = [
        x + TAU * x_dot,
        x_dot + TAU * xacc,
        theta + TAU * theta_dot,
        theta_dot + TAU * thetaacc,
    ];
    let terminated =
        state[0] < -2.4 || state[0] > 2.4 || state[2] < -THETA_LIMIT || state[2] > THETA_LIMIT;
    Step {
        state,
        reward: 1.0,
        terminated,
    }
}

/// Acrobot's time derivative (Gym's "book" dynamics) for torque `a`.
fn acrobot_dsdt(s: [f32; 4], a: f32) -> [f32; 4] {
    const M2: f32 = 1.0;
    const L1: f32 = 1.0;
    const LC1: f32 = 0.5;
    const LC2: f32 = 0.5;
    const I: f32 = 1.0;
    const G: f32 = 9.8;
    let [theta1, theta2, dtheta1, dtheta2] = s;
    let (s2, c2) = sincos(theta2);
    let d1 = LC1 * LC1 + M2 * (L1 * L1 + LC2 * LC2 + 2.0 * L1 * LC2 * c2) + I + I;
    let d2 = M2 * (LC2 * LC2 + L1 * LC2 * c2) + I;
    let phi2 = M2 * LC2 * G * cos(theta1 + theta2 - PI / 2.0);
    let phi1 = -M2 * L1 * LC2 * dtheta2 * dtheta2 * s2
        - 2.0 * M2 * L1 * LC2 * dtheta2 * dtheta1 * s2
        + (LC1 + M2 * L1) * G * cos(theta1 - PI / 2.0)
        + phi2;
    let ddtheta2 = (a + d2 / d1 * phi1 - M2 * L1 * LC2 * dtheta1 * dtheta1 * s2 - phi2)
        / (M2 * LC2 * LC2 + I - d2 * d2 / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    [dtheta1, dtheta2, ddtheta1, ddtheta2]
}

fn wrap(mut x: f32) -> f32 {
    while x > PI {
        x -= 2.0 * PI;
    }
    while x < -PI {
        x += 2.0 * PI;
    }
    x
}

fn acrobot(s: &State, action: f32) -> Step {
    const DT: f32 = 0.2;
    const MAX_VEL_1: f32 = 4.0 * PI;
    const MAX_VEL_2: f32 = 9.0 * PI;
    let torque = action - 1.0; // actions 0, 1, 2: torque -1, 0, +1
                               // RK4, k1 + 2 k2 + 2 k3 + k4 accumulated stage by stage (as the WGSL loop does).
    let mut k = [0.0f32; 4];
    let mut acc = [0.0f32; 4];
    for (h, w) in [(0.0, 1.0), (DT / 2.0, 2.0), (DT / 2.0, 2.0), (DT, 1.0)] {
        let at: [f32; 4] = std::array::from_fn(|i| s[i] + h * k[i]);
        k = acrobot_dsdt(at, torque);
        for i in 0..4 {
            acc[i] += w * k[i];
        }
    }
    let y: [f32; 4] = std::array::from_fn(|i| s[i] + DT / 6.0 * acc[i]);
    let state = [
        wrap(y[0]),
        wrap(y[1]),
        y[2].clamp(-MAX_VEL_1, MAX_VEL_1),
        y[3].clamp(-MAX_VEL_2, MAX_VEL_2),
    ];
    let terminated = -cos(state[0]) - cos(state[1] + state[0]) > 1.0;
    Step {
        state,
        reward: if terminated { 0.0 } else { -1.0 },
        terminated,
    }
}

fn mountain_car(s: &State, action: f32) -> Step {
    let mut velocity = s[1] + (action - 1.0) * 0.001 + cos(3.0 * s[0]) * -0.0025;
    velocity = velocity.clamp(-0.07, 0.07);
    let position = (s[0] + velocity).clamp(-1.2, 0.6);
    if position == -1.2 && velocity < 0.0 {
        velocity = 0.0;
    }
    let terminated = position >= 0.5 && velocity >= 0.0;
    Step {
        state: [position, velocity, 0.0, 0.0],
        reward: -1.0,
        terminated,
    }
}

fn pendulum(s: &State, torque: f32) -> Step {
    const DT: f32 = 0.05;
    let [th, thdot, ..] = *s;
    let u = torque.clamp(-2.0, 2.0);
    // angle_normalize: ((x + pi) mod 2 pi) - pi, the floored modulo.
    let a = th + PI;
    let norm = a - (a / (2.0 * PI)).floor() * (2.0 * PI) - PI;
    let costs = norm * norm + 0.1 * thdot * thdot + 0.001 * (u * u);
    let newthdot = (thdot + (3.0 * 10.0 / 2.0 * sin(th) + 3.0 * u) * DT).clamp(-8.0, 8.0);
    Step {
        state: [th + newthdot * DT, newthdot, 0.0, 0.0],
        reward: -costs,
        terminated: false,
    }
}

/// The Rastrigin function of `x` (minimum 0 at the origin).
pub fn rastrigin(x: &[f32]) -> f32 {
    let mut sum = 10.0 * x.len() as f32;
    for &v in x {
        sum += v * v - 10.0 * cos(2.0 * PI * v);
    }
    sum
}
