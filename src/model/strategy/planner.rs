//! `auto`, the planner: the strategy a generation uses when it names none, and why, in one
//! sentence. Every registered strategy pitches itself for the model on this adapter
//! ([`Pitch`]): the highest-ranked one that claims it wins; when all pass, the baseline
//! (unfused) runs, for the reason the lowest-ranked one passed. Today's ranks: megakernel, then
//! fused, then unfused (the rules and their measurements are in each strategy's `pitch`).
//! A choice made at load (`LoadOptions::strategy`) or by a calibration (`model::calibration`)
//! replaces the rule.

use super::seam::Pitch;
use super::{Strategies, Strategy};
use crate::model::shared::Shared;

#[derive(Debug, Clone, Default)]
pub(crate) struct Planner {
    /// The default strategy and its reason, when the caller or a calibration fixed one.
    chosen: Option<(Strategy, String)>,
}

impl Planner {
    /// The planner of a model loaded with `strategy` (if the caller named one).
    pub(crate) fn new(strategy: Option<Strategy>) -> Self {
        Self {
            chosen: strategy.map(|s| {
                (
                    s,
                    format!(
                        "{}: the strategy the model was loaded with (the strategy option)",
                        s.name()
                    ),
                )
            }),
        }
    }

    /// Makes `strategy` the default, for `reason`.
    pub(crate) fn set(&mut self, strategy: Strategy, reason: String) {
        self.chosen = Some((strategy, reason));
    }

    /// The default strategy and why.
    pub(crate) fn choose(&self, strategies: &Strategies, m: &Shared) -> (Strategy, String) {
        self.choose_among(strategies, m, |_| true)
    }

    /// [`Planner::choose`] among the strategies `keep` accepts (a constrained generation: those
    /// that follow constraints); the fallback when none of them is ranked.
    pub(crate) fn choose_among(
        &self,
        strategies: &Strategies,
        m: &Shared,
        keep: impl Fn(Strategy) -> bool,
    ) -> (Strategy, String) {
        if let Some(chosen) = self.chosen.as_ref().filter(|c| keep(c.0)) {
            return chosen.clone();
        }
        let mut ranked = Vec::new();
        let mut fallback = None;
        for &s in Strategy::ALL.iter().filter(|&&s| keep(s)) {
            match strategies.get(s).pitch(m) {
                Pitch::OptIn => {}
                Pitch::Fallback => fallback = fallback.or(Some(s)),
                Pitch::Ranked(rank, claim) => ranked.push((rank, s, claim)),
            }
        }
        ranked.sort_by_key(|r| std::cmp::Reverse(r.0));
        let mut passed = None;
        for (_, s, claim) in ranked {
            match claim {
                Ok(why) => return (s, format!("{}: {why}", s.name())),
                Err(why) => passed = Some(why),
            }
        }
        let s = fallback.unwrap_or_default();
        let why = passed.unwrap_or_else(|| "the only strategy registered".into());
        (s, format!("{}: {why}", s.name()))
    }

    /// The strategies the planner and calibration choose among (not opt-in), the baseline
    /// first, then by rank (calibration times them in this order).
    pub(crate) fn candidates(strategies: &Strategies, m: &Shared) -> Vec<Strategy> {
        let mut out: Vec<(u32, Strategy)> = Strategy::ALL
            .iter()
            .filter_map(|&s| match strategies.get(s).pitch(m) {
                Pitch::OptIn => None,
                Pitch::Fallback => Some((0, s)),
                Pitch::Ranked(rank, _) => Some((rank.max(1), s)),
            })
            .collect();
        out.sort_by_key(|&(rank, _)| rank);
        out.into_iter().map(|(_, s)| s).collect()
    }
}
