//! A user's own environment, written in WGSL ([`CustomEnv`]), and its checks.

use crate::error::{FuselmError, Result};
use serde::{Deserialize, Serialize};

/// A user environment written in WGSL. The source must define three functions, which the
/// simulation kernels call (fused: all in one loop; unfused: one step per dispatch):
///
/// ```wgsl
/// // The initial state of `member`; draw randomness with sim_uniform(seed, member, slot, lo, hi)
/// // (a counter-based RNG: the same numbers on every GPU and run).
/// fn env_init(seed: u32, member: u32) -> array<f32, STATE_LEN>
/// // What the policy sees.
/// fn env_observe(s: array<f32, STATE_LEN>) -> array<f32, OBS_LEN>
/// // One step: discrete environments get the action's index as f32 (0.0, 1.0, ...), continuous
/// // ones tanh(policy output) in (-1, 1).
/// fn env_step(s: array<f32, STATE_LEN>, action: f32) -> EnvStep
/// ```
///
/// Provided to it: `struct EnvStep { s: array<f32, STATE_LEN>, reward: f32, terminated: bool }`,
/// the constants `STATE_LEN` (= `state_size`), `OBS_LEN` (= `observations`) and `PI`, and
/// `sim_uniform`, `sim_sin`, `sim_cos`, `sim_tanh` (deterministic versions of the builtins).
/// Names starting with `sim_`, `env_` (other than the three), `policy_` or `es_`, and `main`,
/// `p`, `params`, `param`, `pp`, `fitness`, `state`, `rastrigin`, `Params` are the kernels'.
/// The source may not declare bindings or entry points. It is compiled with WebGPU's runtime
/// checks (bounded loops, clamped indexing), so a bad environment cannot read outside its
/// buffers; a WGSL error comes back as `invalid-argument` with the compiler's message.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct CustomEnv {
    /// The WGSL source (at most 256 KiB).
    pub wgsl: String,
    /// Floats of the state (1..=16).
    pub state_size: u32,
    /// Floats of an observation (1..=16).
    pub observations: u32,
    /// Discrete actions (2..=16; the policy's largest output picks one), or absent for one
    /// continuous action, tanh(policy output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(target_arch = "wasm32", tsify(optional))]
    pub actions: Option<u32>,
}

/// Most state floats, observations or outputs a custom environment may have.
pub const MAX_CUSTOM_LEN: u32 = 16;

impl CustomEnv {
    pub(super) fn validate(&self) -> Result<()> {
        let bad = |m: String| {
            Err(FuselmError::InvalidArgument(format!(
                "custom environment: {m}"
            )))
        };
        let range = |v: u32, lo: u32, what: &str| {
            if v < lo || v > MAX_CUSTOM_LEN {
                bad(format!("{what} must be {lo}..={MAX_CUSTOM_LEN}, got {v}"))
            } else {
                Ok(())
            }
        };
        range(self.state_size, 1, "stateSize")?;
        range(self.observations, 1, "observations")?;
        if let Some(a) = self.actions {
            range(a, 2, "actions")?;
        }
        if self.wgsl.len() > 256 * 1024 {
            return bad(format!(
                "the WGSL is {} bytes; at most 256 KiB",
                self.wgsl.len()
            ));
        }
        for attr in ["@group", "@binding", "@compute", "@workgroup_size"] {
            if self.wgsl.contains(attr) {
                return bad(format!(
                    "the WGSL may not declare bindings or entry points (found `{attr}`)"
                ));
            }
        }
        let tokens: Vec<&str> = self
            .wgsl
            .split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .filter(|t| !t.is_empty())
            .collect();
        let signatures = [
            (
                "env_init",
                "fn env_init(seed: u32, member: u32) -> array<f32, STATE_LEN>",
            ),
            (
                "env_observe",
                "fn env_observe(s: array<f32, STATE_LEN>) -> array<f32, OBS_LEN>",
            ),
            (
                "env_step",
                "fn env_step(s: array<f32, STATE_LEN>, action: f32) -> EnvStep",
            ),
        ];
        for (name, signature) in signatures {
            if !tokens.windows(2).any(|w| w == ["fn", name]) {
                return bad(format!(
                    "the WGSL must define `{signature}` ({name} is missing)"
                ));
            }
        }
        Ok(())
    }
}
