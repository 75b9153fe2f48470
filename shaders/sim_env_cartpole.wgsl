// CartPole-v1 (Gym): state (x, x_dot, theta, theta_dot); actions 0 (push left), 1 (push
// right); +1 per step, including the last; ends when |x| > 2.4 or |theta| > 12 degrees. Euler
// integration with tau = 0.02. CPU reference: sim::envs::cartpole.

fn env_init(seed: u32, member: u32) -> array<f32, 4> {
    return array<f32, 4>(
        sim_uniform(seed, member, 0u, -0.05, 0.05),
        sim_uniform(seed, member, 1u, -0.05, 0.05),
        sim_uniform(seed, member, 2u, -0.05, 0.05),
        sim_uniform(seed, member, 3u, -0.05, 0.05),
    );
}

fn env_observe(s: array<f32, 4>) -> array<f32, 8> {
    return array<f32, 8>(s[0], s[1], s[2], s[3], 0.0, 0.0, 0.0, 0.0);
}

fn env_step(s: array<f32, 4>, action: f32) -> EnvStep {
    let x = s[0];
    let x_dot = s[1];
    let theta = s[2];
    let theta_dot = s[3];
    let force = select(-10.0, 10.0, action >= 1.0);
    let sc = sincos(theta);
    let sintheta = sc.x;
    let costheta = sc.y;
    let temp = (force + 0.05 * theta_dot * theta_dot * sintheta) / 1.1;
    let thetaacc = (9.8 * sintheta - costheta * temp)
        / (0.5 * (4.0 / 3.0 - 0.1 * costheta * costheta / 1.1));
    let xacc = temp - 0.05 * thetaacc * costheta / 1.1;
    var out: EnvStep;
    out.s = array<f32, 4>(x + 0.02 * x_dot, x_dot + 0.02 * xacc, theta + 0.02 * theta_dot,
                          theta_dot + 0.02 * thetaacc);
    let limit = 12.0 * 2.0 * PI / 360.0;
    out.terminated = out.s[0] < -2.4 || out.s[0] > 2.4 || out.s[2] < -limit || out.s[2] > limit;
    out.reward = 1.0;
    return out;
}
