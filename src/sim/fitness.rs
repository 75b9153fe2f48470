//! What one member's episode scored ([`Fitness`]).

use serde::{Deserialize, Serialize};

/// One member's result.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
#[serde(rename_all = "camelCase")]
pub struct Fitness {
    /// Sum of the rewards, in step order (f32).
    pub total_reward: f32,
    /// Steps taken before termination or the episode's end.
    pub steps: u32,
}
