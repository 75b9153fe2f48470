//! What to evaluate ([`PopulationSpec`]) and its checks.

use super::env::Env;
use super::policy::{Policy, MAX_HIDDEN, MAX_RECURRENT};
use crate::error::{FuselmError, Result};

/// What to evaluate.
#[derive(Debug, Clone, PartialEq)]
pub struct PopulationSpec {
    pub env: Env,
    pub policy: Policy,
    /// Members.
    pub population: u32,
    /// Steps per episode at most.
    pub episode_length: u32,
    /// Seed of the initial states.
    pub seed: u32,
}

impl PopulationSpec {
    /// Checks the settings; the error names what is wrong.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(FuselmError::InvalidArgument(m));
        if self.population == 0 {
            return bad("population must be at least 1".into());
        }
        if self.episode_length == 0 && !matches!(self.env, Env::Rastrigin { .. }) {
            return bad("episodeLength must be at least 1".into());
        }
        if let Policy::Mlp { hidden } = self.policy {
            if hidden == 0 || hidden > MAX_HIDDEN {
                return bad(format!(
                    "policy hidden units must be 1..={MAX_HIDDEN}, got {hidden}"
                ));
            }
        }
        if let Policy::Recurrent { hidden } = self.policy {
            if hidden == 0 || hidden > MAX_RECURRENT {
                return bad(format!(
                    "recurrent policy hidden units must be 1..={MAX_RECURRENT}, got {hidden}"
                ));
            }
        }
        if let Env::Rastrigin { dim } = self.env {
            if dim == 0 || dim > 4096 {
                return bad(format!("rastrigin dim must be 1..=4096, got {dim}"));
            }
        }
        if let Env::Custom(c) = &self.env {
            c.validate()?;
        }
        Ok(())
    }

    /// [`validate`](Self::validate), and that the CPU reference can run this environment.
    pub fn validate_cpu(&self) -> Result<()> {
        self.validate()?;
        if !self.env.has_cpu_reference() {
            return Err(FuselmError::InvalidArgument(
                "a custom environment has no CPU reference: evaluate it on the GPU".into(),
            ));
        }
        Ok(())
    }

    pub fn parameters(&self) -> u32 {
        self.policy.parameters(&self.env)
    }

    /// Checks that `params` holds `population × parameters()` finite-or-not floats.
    pub fn check_params(&self, params: &[f32]) -> Result<()> {
        let want = u64::from(self.population) * u64::from(self.parameters());
        if params.len() as u64 != want {
            return Err(FuselmError::InvalidArgument(format!(
                "params: expected population × parameters = {} × {} = {want} floats, got {}",
                self.population,
                self.parameters(),
                params.len()
            )));
        }
        Ok(())
    }
}
