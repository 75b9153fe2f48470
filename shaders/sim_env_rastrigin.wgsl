// The Rastrigin "environment" has no dynamics: sim_rollout.wgsl evaluates the function once
// per member (RASTRIGIN, `rastrigin` there). These env_* functions only complete the interface
// the kernels compile against; with RASTRIGIN set they are never called.

fn env_init(seed: u32, member: u32) -> array<f32, 4> {
    return array<f32, 4>();
}

fn env_observe(s: array<f32, 4>) -> array<f32, 8> {
    return array<f32, 8>();
}

fn env_step(s: array<f32, 4>, action: f32) -> EnvStep {
    var out: EnvStep;
    out.terminated = true;
    return out;
}
