// MountainCar-v0 (Gym): state (position, velocity); actions 0, 1, 2 accelerate left, not at
// all, right; -1 per step until position >= 0.5 with velocity >= 0. CPU reference:
// sim::envs::mountain_car.

fn env_init(seed: u32, member: u32) -> array<f32, 4> {
    return array<f32, 4>(sim_uniform(seed, member, 0u, -0.6, -0.4), 0.0, 0.0, 0.0);
}

fn env_observe(s: array<f32, 4>) -> array<f32, 8> {
    return array<f32, 8>(s[0], s[1], 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
}

fn env_step(s: array<f32, 4>, action: f32) -> EnvStep {
    var velocity = s[1] + (action - 1.0) * 0.001 + sim_cos(3.0 * s[0]) * -0.0025;
    velocity = clamp(velocity, -0.07, 0.07);
    let position = clamp(s[0] + velocity, -1.2, 0.6);
    if position == -1.2 && velocity < 0.0 {
        velocity = 0.0;
    }
    var out: EnvStep;
    out.s = array<f32, 4>(position, velocity, 0.0, 0.0);
    out.terminated = position >= 0.5 && velocity >= 0.0;
    out.reward = -1.0;
    return out;
}
