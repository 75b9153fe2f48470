//! `megakernel-grid` (experimental, opt-in, native only): the megakernel compiled in grid mode
//! (`MegaModel::grid_call`) over as many persistent workgroups as the adapter keeps resident,
//! meeting at grid barriers on storage atomics. WebGPU promises neither the memory ordering nor
//! the co-residency this needs, so it runs only where wgpu offers coherent storage (Vulkan,
//! Metal, DX12), with a measured workgroup count and bounded spins (a typed error instead of a
//! hang). Never chosen by the planner or calibration. It builds its own arena and KV cache, as
//! the megakernel does, on first use.

use super::megakernel::{build, check, generate};
use super::seam::{GenerationStrategy, LocalFuture, Pitch};
use crate::error::{FuselmError, Result};
use crate::kernels::megakernel::check_grid;
use crate::model::generation::{Run, TokenGeneration};
use crate::model::megakernel::{mega_shape, MegaModel};
use crate::model::shared::Shared;

pub(crate) struct MegakernelGrid {
    /// Built on first use, or why this model cannot use it.
    mega: Option<Result<MegaModel>>,
    /// What the occupancy discovery measured (on first use; kept when the activations are
    /// rebuilt).
    discovered: Option<u32>,
}

impl MegakernelGrid {
    /// Builds the grid megakernel if needed and returns its workgroup count: the context's
    /// `KernelTuning::grid_workgroups` if set, else what the occupancy discovery measured on
    /// this adapter (once per model) — except on a software adapter, where it is 1: there
    /// workgroups are CPU threads, and lavapipe's per-invocation loop cap (~65k back-edges)
    /// ends a spin that waits for a busy thread, so a grid barrier across threads times out
    /// (the typed error) instead of waiting.
    async fn ready(&mut self, m: &Shared) -> Result<u32> {
        // Where it cannot run (a browser), say so before copying the weights into an arena.
        check_grid(&m.ctx, &mega_shape(&m.config, m.acts.n_ctx)?, 1)?;
        let mega = build(&mut self.mega, m).await?;
        let software = m.ctx.identity.is_software;
        let workgroups = match (m.ctx.tuning().grid_workgroups, self.discovered) {
            (Some(n), _) => n,
            (None, _) if software => 1,
            (None, Some(n)) => n,
            (None, None) => {
                let n = mega
                    .discover_workgroups(&m.ctx, &m.acts, &m.sampler)
                    .await?;
                self.discovered = Some(n);
                n
            }
        };
        mega.grid_call(&m.ctx, &m.acts, &m.sampler, workgroups)
            .await?;
        Ok(workgroups)
    }
}

impl GenerationStrategy for MegakernelGrid {
    fn load(_: &Shared) -> LocalFuture<'_, Result<Self>> {
        Box::pin(async {
            Ok(Self {
                mega: None,
                discovered: None,
            })
        })
    }

    /// Bound to the old activations (state, tokens): rebuilt on use.
    fn rebind<'a>(&'a mut self, _: &'a Shared) -> LocalFuture<'a, Result<()>> {
        self.mega = None;
        Box::pin(async { Ok(()) })
    }

    fn check(&self, m: &Shared) -> Result<()> {
        check(&self.mega, m)?;
        check_grid(&m.ctx, &mega_shape(&m.config, m.acts.n_ctx)?, 1)
    }

    fn prepare<'a>(&'a mut self, m: &'a Shared) -> LocalFuture<'a, Result<Option<String>>> {
        Box::pin(async move {
            let n = self.ready(m).await?;
            Ok(Some(format!(
                "megakernel-grid runs {n} workgroups (occupancy discovery: {})",
                self.discovered
                    .map_or("not run".to_string(), |d| d.to_string())
            )))
        })
    }

    fn pitch(&self, _: &Shared) -> Pitch {
        Pitch::OptIn
    }

    fn calibrates<'a>(
        &'a mut self,
        _: &'a Shared,
    ) -> LocalFuture<'a, std::result::Result<(), String>> {
        Box::pin(async { Err("opt-in only".to_string()) })
    }

    /// The whole generation's one dispatch: 0 per step.
    fn dispatches_per_step(&self, _: &Shared, _sampling: bool) -> Result<u32> {
        Ok(0)
    }

    /// A timed generation runs in one dispatch.
    fn timed_chunk(&self, _requested: u32, new_tokens: u32) -> u32 {
        new_tokens
    }

    fn one_dispatch(&self) -> bool {
        true
    }

    /// As the portable megakernel's (`Megakernel::constraints`).
    fn constraints(&self) -> bool {
        true
    }

    fn own_kv_cache(&self) -> bool {
        true
    }

    fn own_kv(&self) -> Option<&wgpu::Buffer> {
        self.mega.as_ref()?.as_ref().ok().map(MegaModel::kv)
    }

    fn generate<'a>(
        &'a mut self,
        m: &'a Shared,
        run: &'a Run<'a>,
        on_token: &'a mut dyn FnMut(u32) -> bool,
    ) -> LocalFuture<'a, Result<TokenGeneration>> {
        Box::pin(async move {
            let workgroups = self.ready(m).await?;
            let Some(Ok(mega)) = &self.mega else {
                unreachable!("ready succeeded")
            };
            let Some((_, call)) = mega.built_grid() else {
                return Err(FuselmError::Gpu("the grid megakernel is not built".into()));
            };
            generate(mega, call, Some(workgroups), m, run, on_token).await
        })
    }

    fn bytes(&self) -> u64 {
        match &self.mega {
            Some(Ok(mega)) => mega.bytes(),
            _ => 0,
        }
    }

    fn release(&mut self) -> bool {
        matches!(self.mega.take(), Some(Ok(_)))
    }

    fn workgroups(&self) -> Option<u32> {
        match &self.mega {
            Some(Ok(mega)) => mega.built_grid().map(|(n, _)| n),
            _ => None,
        }
    }
}
