//! Generation strategies: how the steps of a generation are recorded, submitted and read.
//!
//! Each strategy is one type in one file of this folder that owns its GPU state and implements
//! [`GenerationStrategy`](seam::GenerationStrategy) (`seam.rs`): whether it can run this model
//! on this adapter (and why not), what it tells the planner, its chunk policy, dispatches per
//! step, and the generation itself. The list below registers them: adding a strategy is a new
//! file and one line there, which also names it in [`Strategy`] (the enum the API takes).
//! `auto`, the default, is the planner (`planner.rs`) choosing among the registered strategies.

mod fused;
mod megakernel;
mod megakernel_grid;
pub(crate) mod planner;
pub(crate) mod seam;
mod unfused;

use crate::error::{FuselmError, Result};
use crate::model::shared::Shared;
use seam::GenerationStrategy;
use serde::{Deserialize, Serialize};

/// Declares [`Strategy`] (one variant per line, in this order: the order of `Strategy::ALL`
/// and of the TypeScript union) and [`Strategies`], one loaded state per strategy.
macro_rules! register {
    ($($(#[$doc:meta])* $variant:ident = $name:literal => $state:ty,)+) => {
        /// How a generation is run on the GPU. Every strategy gives the same tokens for the same
        /// settings (greedy and seeded sampling).
        #[derive(Debug, Clone, Copy, Default, Serialize, Deserialize, PartialEq, Eq, Hash)]
        #[serde(rename_all = "kebab-case")]
        #[cfg_attr(target_arch = "wasm32", derive(tsify::Tsify))]
        pub enum Strategy {
            $($(#[$doc])* $variant,)+
        }

        impl Strategy {
            /// Every strategy, in registration order.
            pub const ALL: &'static [Strategy] = &[$(Strategy::$variant),+];

            pub fn name(self) -> &'static str {
                match self {
                    $(Strategy::$variant => $name,)+
                }
            }
        }

        impl Strategies {
            /// Every registered strategy, loaded for the model whose shared buffers are `m`.
            pub(crate) async fn load(m: &Shared) -> Result<Self> {
                Ok(Self {
                    states: vec![$(Box::new(<$state>::load(m).await?),)+],
                })
            }
        }
    };
}

register! {
    /// Fused kernels (4 dispatches per layer), sampling on the GPU, a whole chunk of tokens
    /// per compute pass. The default.
    #[default]
    Fused = "fused" => fused::Fused,
    /// The baseline: one dispatch per operation, one submit and one logits readback per token,
    /// sampling on the host.
    Unfused = "unfused" => unfused::Unfused,
    /// The whole generation in one dispatch of one workgroup (llama-family models): no
    /// dispatch or round-trip cost at all, but one workgroup's share of the GPU, so it wins
    /// only on small models.
    Megakernel = "megakernel" => megakernel::Megakernel,
    /// Experimental, opt-in, native only: the megakernel over as many persistent workgroups
    /// as the adapter keeps resident, meeting at grid barriers on storage atomics. WebGPU
    /// promises neither the memory ordering nor the co-residency this needs, so it runs only
    /// where wgpu offers coherent storage (Vulkan, Metal, DX12), with a measured workgroup
    /// count and bounded spins (a typed error instead of a hang). Never chosen by `auto`.
    MegakernelGrid = "megakernel-grid" => megakernel_grid::MegakernelGrid,
}

impl Strategy {
    pub fn parse(s: &str) -> Result<Self> {
        Self::ALL
            .iter()
            .copied()
            .find(|x| x.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::ALL.iter().map(|x| x.name()).collect();
                FuselmError::InvalidArgument(format!(
                    "strategy must be one of {}; got {s:?}",
                    names.join(", ")
                ))
            })
    }
}

/// The registered strategies' states for one model, indexed by [`Strategy`].
pub(crate) struct Strategies {
    states: Vec<Box<dyn GenerationStrategy>>,
}

impl Strategies {
    pub(crate) fn get(&self, s: Strategy) -> &dyn GenerationStrategy {
        self.states[s as usize].as_ref()
    }

    pub(crate) fn get_mut(&mut self, s: Strategy) -> &mut dyn GenerationStrategy {
        self.states[s as usize].as_mut()
    }

    /// Every strategy binds again to the shared buffers (after the activations changed).
    pub(crate) async fn rebind(&mut self, m: &Shared) -> Result<()> {
        for s in &mut self.states {
            s.rebind(m).await?;
        }
        Ok(())
    }

    /// GPU bytes the strategies built on first use.
    pub(crate) fn bytes(&self) -> u64 {
        self.states.iter().map(|s| s.bytes()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::Strategy;

    #[test]
    fn names_are_the_serialized_names() {
        for &s in Strategy::ALL {
            assert_eq!(
                serde_json::to_string(&s).expect("serializes"),
                format!("\"{}\"", s.name())
            );
            assert_eq!(Strategy::parse(s.name()).expect("parses"), s);
        }
        assert!(Strategy::parse("auto").is_err());
    }
}
