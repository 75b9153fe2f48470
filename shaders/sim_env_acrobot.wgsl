// Acrobot-v1 (Gym, "book" dynamics, one RK4 step of dt = 0.2): state (theta1, theta2,
// dtheta1, dtheta2); actions 0, 1, 2 apply torque -1, 0, +1 at the joint; -1 per step until
// -cos(theta1) - cos(theta1 + theta2) > 1 (then 0 and the episode ends). Observation (cos
// theta1, sin theta1, cos theta2, sin theta2, dtheta1, dtheta2). CPU reference:
// sim::envs::acrobot.

fn env_init(seed: u32, member: u32) -> array<f32, 4> {
    return array<f32, 4>(
        sim_uniform(seed, member, 0u, -0.1, 0.1),
        sim_uniform(seed, member, 1u, -0.1, 0.1),
        sim_uniform(seed, member, 2u, -0.1, 0.1),
        sim_uniform(seed, member, 3u, -0.1, 0.1),
    );
}

fn env_observe(s: array<f32, 4>) -> array<f32, 8> {
    let a = sincos(s[0]);
    let b = sincos(s[1]);
    return array<f32, 8>(a.y, a.x, b.y, b.x, s[2], s[3], 0.0, 0.0);
}

fn acrobot_dsdt(s: array<f32, 4>, a: f32) -> array<f32, 4> {
    let theta1 = s[0];
    let theta2 = s[1];
    let dtheta1 = s[2];
    let dtheta2 = s[3];
    let sc2 = sincos(theta2);
    let s2 = sc2.x;
    let c2 = sc2.y;
    let d1 = 0.5 * 0.5 + 1.0 * (1.0 * 1.0 + 0.5 * 0.5 + 2.0 * 1.0 * 0.5 * c2) + 1.0 + 1.0;
    let d2 = 1.0 * (0.5 * 0.5 + 1.0 * 0.5 * c2) + 1.0;
    let phi2 = 1.0 * 0.5 * 9.8 * sim_cos(theta1 + theta2 - PI / 2.0);
    let phi1 = -1.0 * 1.0 * 0.5 * dtheta2 * dtheta2 * s2
        - 2.0 * 1.0 * 1.0 * 0.5 * dtheta2 * dtheta1 * s2
        + (0.5 + 1.0 * 1.0) * 9.8 * sim_cos(theta1 - PI / 2.0)
        + phi2;
    let ddtheta2 = (a + d2 / d1 * phi1 - 1.0 * 1.0 * 0.5 * dtheta1 * dtheta1 * s2 - phi2)
        / (1.0 * 0.5 * 0.5 + 1.0 - d2 * d2 / d1);
    let ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
    return array<f32, 4>(dtheta1, dtheta2, ddtheta1, ddtheta2);
}

fn acrobot_add(y: array<f32, 4>, k: array<f32, 4>, h: f32) -> array<f32, 4> {
    return array<f32, 4>(y[0] + h * k[0], y[1] + h * k[1], y[2] + h * k[2], y[3] + h * k[3]);
}

fn acrobot_wrap(v: f32) -> f32 {
    var x = v;
    for (var i = 0u; i < 64u && x > PI; i++) {
        x -= 2.0 * PI;
    }
    for (var i = 0u; i < 64u && x < -PI; i++) {
        x += 2.0 * PI;
    }
    return x;
}

fn env_step(s: array<f32, 4>, action: f32) -> EnvStep {
    let dt = 0.2;
    let torque = action - 1.0;
    // RK4 as a loop over its four stages with one call of the derivative (k_{n+1} at
    // s + h_n k_n, with h = 0, dt/2, dt/2, dt), accumulating k1 + 2 k2 + 2 k3 + k4 in that
    // order: written out, four inlined copies of acrobot_dsdt in the episode loop took
    // SwiftShader's compiler past 13 GB.
    var k = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    var acc = array<f32, 4>(0.0, 0.0, 0.0, 0.0);
    for (var stage = 0u; stage < 4u; stage++) {
        let h = select(select(dt / 2.0, dt, stage == 3u), 0.0, stage == 0u);
        k = acrobot_dsdt(acrobot_add(s, k, h), torque);
        let w = select(2.0, 1.0, stage == 0u || stage == 3u);
        for (var i = 0u; i < 4u; i++) {
            acc[i] += w * k[i];
        }
    }
    var y: array<f32, 4>;
    for (var i = 0u; i < 4u; i++) {
        y[i] = s[i] + dt / 6.0 * acc[i];
    }
    var out: EnvStep;
    out.s = array<f32, 4>(acrobot_wrap(y[0]), acrobot_wrap(y[1]), clamp(y[2], -4.0 * PI, 4.0 * PI),
                          clamp(y[3], -9.0 * PI, 9.0 * PI));
    out.terminated = -sim_cos(out.s[0]) - sim_cos(out.s[1] + out.s[0]) > 1.0;
    out.reward = select(-1.0, 0.0, out.terminated);
    return out;
}
