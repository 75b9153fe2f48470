// Declarations shared by the simulation kernels (sim_rollout.wgsl, sim_step.wgsl), the
// environments (sim_env_*.wgsl) and the policies (sim_policy.wgsl); the CPU reference is
// src/sim/ (math.rs mirrors these functions op for op). rope_math.wgsl's `sincos` is prepended
// too: WGSL only bounds its builtin sin/cos to 2^-11 absolute error.

// One environment step: the next state (STATE_LEN floats: 4 for the built-in environments,
// padded), its reward, and whether the episode ended.
struct EnvStep {
    s: array<f32, STATE_LEN>,
    reward: f32,
    terminated: bool,
}

const PI: f32 = 3.14159265358979;

fn sim_pcg(v: u32) -> u32 {
    let st = v * 747796405u + 2891336453u;
    let w = ((st >> ((st >> 28u) + 4u)) ^ st) * 277803737u;
    return (w >> 22u) ^ w;
}

// Uniform in [lo, hi), a pure function of (seed, member, slot) (sim::math::uniform_in).
fn sim_uniform(seed: u32, member: u32, slot: u32, lo: f32, hi: f32) -> f32 {
    let u = f32(sim_pcg(slot ^ sim_pcg(member ^ sim_pcg(seed))) >> 8u) * (1.0 / 16777216.0);
    return lo + (hi - lo) * u;
}

fn sim_sin(x: f32) -> f32 {
    return sincos(x).x;
}

fn sim_cos(x: f32) -> f32 {
    return sincos(x).y;
}

// tanh from exp, its argument clamped to ±15 (sim::math::tanh).
fn sim_tanh(x: f32) -> f32 {
    let e = exp(2.0 * clamp(x, -15.0, 15.0));
    return 1.0 - 2.0 / (e + 1.0);
}
