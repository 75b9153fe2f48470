// Pendulum-v1 (Gym): state (theta, theta_dot); a continuous torque clipped to [-2, 2]; reward
// -(normalised angle^2 + 0.1 theta_dot^2 + 0.001 torque^2); never terminates. Observation (cos
// theta, sin theta, theta_dot). CPU reference: sim::envs::pendulum.

fn env_init(seed: u32, member: u32) -> array<f32, 4> {
    return array<f32, 4>(sim_uniform(seed, member, 0u, -PI, PI), sim_uniform(seed, member, 1u, -1.0, 1.0),
                         0.0, 0.0);
}

fn env_observe(s: array<f32, 4>) -> array<f32, 8> {
    let sc = sincos(s[0]);
    return array<f32, 8>(sc.y, sc.x, s[1], 0.0, 0.0, 0.0, 0.0, 0.0);
}

fn env_step(s: array<f32, 4>, torque: f32) -> EnvStep {
    let th = s[0];
    let thdot = s[1];
    let u = clamp(torque, -2.0, 2.0);
    let a = th + PI;
    let norm = a - floor(a / (2.0 * PI)) * (2.0 * PI) - PI;
    let costs = norm * norm + 0.1 * thdot * thdot + 0.001 * (u * u);
    let newthdot = clamp(thdot + (3.0 * 10.0 / 2.0 * sim_sin(th) + 3.0 * u) * 0.05, -8.0, 8.0);
    var out: EnvStep;
    out.s = array<f32, 4>(th + newthdot * 0.05, newthdot, 0.0, 0.0);
    out.reward = -costs;
    out.terminated = false;
    return out;
}
