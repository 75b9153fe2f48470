//! Measurement overrides of the kernels' launch parameters.
//!
//! Each parameter has a measured rule (documented where it is computed, with the measurements
//! in bench/NOTES.md); [`KernelTuning::default`] overrides none of them, and that is what every
//! user of the library gets. A benchmark that compares variants on one device fills the struct
//! and creates its [`GpuContext`](crate::gpu::GpuContext) with it (`ContextOptions::tuning`):
//! the native CLI from `--tune name=value` or the `FUSELM_*` variables it reads
//! (`fuselm generate --help`). The library itself never reads the environment.

use crate::error::{FuselmError, Result};

/// Overrides of the kernels' measured launch parameters; `None` keeps the measured rule.
/// Out-of-range values are refused when the context is created ([`KernelTuning::check`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KernelTuning {
    /// Lanes per output row of the fused matrix-vector kernels (`lanes_for`; a power of two,
    /// 32–256, capped at each kernel's workgroup: qkv 128). Default: the fewest from 32 that
    /// leave each lane at most two 8-value units.
    pub lanes: Option<u32>,
    /// Row passes per `fused_qkv` workgroup (`qkv_passes`; 1–16). Default: 1 with several
    /// rows per lane, else enough that at least 512 workgroups remain, at most 8.
    pub qkv_passes: Option<u32>,
    /// Rows per lane in each `fused_qkv` pass (`qkv_rows_per_lane`; 1, 2 or 4, with at most
    /// 8 rows a pass). Default: 2 where rows take 128 lanes, else 1.
    pub qkv_rows_per_lane: Option<u32>,
    /// Lanes per row of `fused_ffn_up` alone (a power of two, 32–256; `lanes` sets every
    /// fused matrix-vector kernel's). Default: `lanes_for`'s rule.
    pub up_lanes: Option<u32>,
    /// Whether `fused_ffn_up` splits the attention combine into a dispatch of its own
    /// (`ffn_up_precombine`; 0: never, 1: always but with post norms). Default: once the
    /// partials each workgroup would read reach 65,536 floats.
    pub precombine: Option<u32>,
    /// Whether single-chunk steps project the attention output in a dispatch of its own
    /// (`o_split`; 0: never, 1: wherever the architecture allows). Default: where
    /// `precombine`'s rule holds at one chunk.
    pub o_split: Option<u32>,
    /// Lanes per row of `fused_o_proj` (a power of two, 32–256). Default: 128.
    pub o_lanes: Option<u32>,
    /// Rows per lane of `fused_o_proj` (1, 2 or 4). Default: 4.
    pub o_rows_per_lane: Option<u32>,
    /// Row passes per `fused_ffn_up` workgroup (`ffn_up_passes`; 1–32). Default: one per
    /// 4,096 floats of n_head × n_embd, 1 to 16.
    pub ffn_passes: Option<u32>,
    /// Rows per lane of `fused_ffn_down` (`down_rows_per_lane`; 1, 2 or 4). Default: 1 below
    /// n_ff 4096, else as many as keep 16 weight units per lane.
    pub down_rows_per_lane: Option<u32>,
    /// Workgroups `fused_attention` aims for at short contexts (1–4096). Default: 64
    /// (`ATTENTION_MIN_GROUPS`); the 512-row cap per Wo block still applies.
    pub attention_groups: Option<u32>,
    /// Wo passes each `fused_attention` invocation loads up front, general variant
    /// (`attention_preloads`; 1–18). Default: 9 at head_dim <= 64, else 3, divided by the heads
    /// per workgroup.
    pub attention_kp: Option<u32>,
    /// The same for the single-chunk variant (1–18). Default: 3, divided likewise.
    pub attention_kp_single: Option<u32>,
    /// Value rows each `fused_attention` invocation loads before the scores (1–16). Default:
    /// 16 at head_dim <= 64, else 2.
    pub attention_vp: Option<u32>,
    /// Query heads per `fused_attention` workgroup (`attention_heads_per_group`; 1–4). Used
    /// only where it divides the KV group size and keeps the heads' queries within 256 floats
    /// (and never with per-head Q/K norms); elsewhere the rule's choice stays. Default: 1
    /// unless n_head × n_embd ≥ 16,384, then the largest such divisor up to 4.
    pub attention_heads_per_group: Option<u32>,
    /// Lanes per row of the output head (`head_logits`; 32, 64, 128 or 256). Default: 32.
    pub head_lanes: Option<u32>,
    /// A prefill product uses the 64 x 64 matrix tile (`matmul_wide.wgsl`) instead of the
    /// 32 x 32 one (`matmul.wgsl`) where it makes at least this many workgroups; 0 never, 1
    /// always. Default:
    /// [`crate::kernels::WIDE_FROM_GROUPS`].
    pub matmul_wide_from: Option<u32>,
    /// Whether prefill matrix products run on cooperative matrices where the device has them
    /// (`matmul_coop.wgsl`; 0: never, 1: where available; 1 also makes the context request
    /// wgpu's experimental cooperative-matrix feature). Default: never (slower than the SIMT
    /// tiles as built: bench/NOTES.md, "Tensor cores for prefill").
    pub matmul_coop: Option<u32>,
    /// Prefill batches of at least this many tokens use the tiled attention kernel
    /// (`attention_tiled.wgsl`); 0 never. Default: [`crate::kernels::TILED_FROM_TOKENS`] (64 for
    /// tiles of 256 invocations).
    pub attention_tiled_from: Option<u32>,
    /// Workgroups of the grid megakernel (strategy `megakernel-grid`; at least 1, and within
    /// the adapter's dispatch limit when it runs). Default: what its occupancy discovery
    /// measures on the adapter (1 on a software adapter).
    pub grid_workgroups: Option<u32>,
}

/// One tunable parameter: its name (`--tune name=value`), the environment variable the CLI
/// reads for it, the values it accepts, and its field.
struct Parameter {
    name: &'static str,
    var: &'static str,
    ok: fn(u32) -> bool,
    field: fn(&mut KernelTuning) -> &mut Option<u32>,
}

const PARAMETERS: [Parameter; 20] = [
    Parameter {
        name: "o-split",
        var: "FUSELM_O_SPLIT",
        ok: |v| v <= 1,
        field: |t| &mut t.o_split,
    },
    Parameter {
        name: "o-lanes",
        var: "FUSELM_O_LANES",
        ok: |v| v.is_power_of_two() && (32..=256).contains(&v),
        field: |t| &mut t.o_lanes,
    },
    Parameter {
        name: "o-rpl",
        var: "FUSELM_O_RPL",
        ok: |v| [1, 2, 4].contains(&v),
        field: |t| &mut t.o_rows_per_lane,
    },
    Parameter {
        name: "precombine",
        var: "FUSELM_PRECOMBINE",
        ok: |v| v <= 1,
        field: |t| &mut t.precombine,
    },
    Parameter {
        name: "qkv-passes",
        var: "FUSELM_QKV_PASSES",
        ok: |v| (1..=16).contains(&v),
        field: |t| &mut t.qkv_passes,
    },
    Parameter {
        name: "qkv-rpl",
        var: "FUSELM_QKV_RPL",
        ok: |v| [1, 2, 4].contains(&v),
        field: |t| &mut t.qkv_rows_per_lane,
    },
    Parameter {
        name: "up-lanes",
        var: "FUSELM_UP_LANES",
        ok: |v| v.is_power_of_two() && (32..=256).contains(&v),
        field: |t| &mut t.up_lanes,
    },
    Parameter {
        name: "lanes",
        var: "FUSELM_LANES",
        ok: |v| v.is_power_of_two() && (32..=256).contains(&v),
        field: |t| &mut t.lanes,
    },
    Parameter {
        name: "ffn-passes",
        var: "FUSELM_FFN_PASSES",
        ok: |v| (1..=32).contains(&v),
        field: |t| &mut t.ffn_passes,
    },
    Parameter {
        name: "down-rpl",
        var: "FUSELM_DOWN_RPL",
        ok: |v| [1, 2, 4].contains(&v),
        field: |t| &mut t.down_rows_per_lane,
    },
    Parameter {
        name: "att-groups",
        var: "FUSELM_ATT_GROUPS",
        ok: |v| (1..=4096).contains(&v),
        field: |t| &mut t.attention_groups,
    },
    Parameter {
        name: "att-kp",
        var: "FUSELM_ATT_KP",
        ok: |v| (1..=18).contains(&v),
        field: |t| &mut t.attention_kp,
    },
    Parameter {
        name: "att-kp-single",
        var: "FUSELM_ATT_KP_SINGLE",
        ok: |v| (1..=18).contains(&v),
        field: |t| &mut t.attention_kp_single,
    },
    Parameter {
        name: "att-vp",
        var: "FUSELM_ATT_VP",
        ok: |v| (1..=16).contains(&v),
        field: |t| &mut t.attention_vp,
    },
    Parameter {
        name: "att-hg",
        var: "FUSELM_ATT_HG",
        ok: |v| (1..=4).contains(&v),
        field: |t| &mut t.attention_heads_per_group,
    },
    Parameter {
        name: "head-lanes",
        var: "FUSELM_HEAD_LANES",
        ok: |v| [32, 64, 128, 256].contains(&v),
        field: |t| &mut t.head_lanes,
    },
    Parameter {
        name: "matmul-wide-from",
        var: "FUSELM_MATMUL_WIDE_FROM",
        ok: |_| true,
        field: |t| &mut t.matmul_wide_from,
    },
    Parameter {
        name: "matmul-coop",
        var: "FUSELM_MATMUL_COOP",
        ok: |v| v <= 1,
        field: |t| &mut t.matmul_coop,
    },
    Parameter {
        name: "attention-tiled-from",
        var: "FUSELM_ATTENTION_TILED_FROM",
        ok: |_| true,
        field: |t| &mut t.attention_tiled_from,
    },
    Parameter {
        name: "grid-workgroups",
        var: "FUSELM_GRID_WORKGROUPS",
        ok: |v| v >= 1,
        field: |t| &mut t.grid_workgroups,
    },
];

impl KernelTuning {
    /// The parameters' names (`set`'s `name`) with the environment variable the CLI reads for
    /// each.
    pub fn names() -> impl Iterator<Item = (&'static str, &'static str)> {
        PARAMETERS.iter().map(|p| (p.name, p.var))
    }

    /// Sets the parameter called `name` (see [`KernelTuning::names`]) to `value`.
    pub fn set(&mut self, name: &str, value: u32) -> Result<()> {
        let Some(p) = PARAMETERS.iter().find(|p| p.name == name) else {
            let names: Vec<_> = Self::names().map(|(n, _)| n).collect();
            return Err(FuselmError::InvalidArgument(format!(
                "unknown kernel parameter {name:?}; one of {}",
                names.join(", ")
            )));
        };
        if !(p.ok)(value) {
            return Err(out_of_range(name, value));
        }
        *(p.field)(self) = Some(value);
        Ok(())
    }

    /// Refuses an override outside the values its parameter accepts.
    pub fn check(&self) -> Result<()> {
        let mut copy = *self;
        for p in &PARAMETERS {
            if let Some(v) = *(p.field)(&mut copy) {
                if !(p.ok)(v) {
                    return Err(out_of_range(p.name, v));
                }
            }
        }
        Ok(())
    }
}

fn out_of_range(name: &str, value: u32) -> FuselmError {
    FuselmError::InvalidArgument(format!(
        "kernel parameter {name} = {value} is out of range (bench/NOTES.md lists the values)"
    ))
}

#[cfg(test)]
mod tests {
    use super::KernelTuning;

    #[test]
    fn set_checks_names_and_ranges() {
        let mut t = KernelTuning::default();
        t.set("lanes", 64).expect("in range");
        assert_eq!(t.lanes, Some(64));
        assert!(t.set("lanes", 48).is_err(), "not a power of two");
        assert_eq!(t.lanes, Some(64), "a refused value changes nothing");
        assert!(t.set("down-rpl", 3).is_err());
        assert!(t.set("qkv-rpl", 8).is_err());
        t.set("qkv-rpl", 4).expect("in range");
        assert_eq!(t.qkv_rows_per_lane, Some(4));
        assert!(t.set("no-such", 1).is_err());
        assert!(t.set("matmul-coop", 2).is_err(), "0 or 1");
        t.set("matmul-coop", 1).expect("in range");
        assert_eq!(t.matmul_coop, Some(1));
        assert_eq!(KernelTuning::names().count(), 20);
    }
}
