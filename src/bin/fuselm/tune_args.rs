//! `--tune NAME=VALUE` (repeatable) for `generate` and `bench`: the measurement settings of
//! `fuselm::gpu::ContextOptions`, to compare kernel variants on one device. The library never
//! reads the environment; for the bench scripts, this command line also takes each setting from
//! its `FUSELM_*` variable when no `--tune` names it.

use fuselm::gpu::ContextOptions;
use fuselm::kernels::KernelTuning;
use std::error::Error;

/// The help of `--tune`; a test checks that it names every parameter of `KernelTuning`.
const HELP: &str = "\
A kernel measurement setting, NAME=VALUE (repeatable); without it every setting is the \
measured default (bench/NOTES.md). Each NAME also reads its environment variable when no \
--tune names it:
  lanes=32|64|128|256       FUSELM_LANES          lanes per row of the fused matrix-vector kernels
  qkv-passes=1..16          FUSELM_QKV_PASSES     row passes per fused_qkv workgroup
  up-lanes=32|64|128|256    FUSELM_UP_LANES       lanes per row of fused_ffn_up alone
  precombine=0|1            FUSELM_PRECOMBINE     fused_ffn_up's attention combine as its own dispatch
  ffn-passes=1..32          FUSELM_FFN_PASSES     row passes per fused_ffn_up workgroup
  down-rpl=1|2|4            FUSELM_DOWN_RPL       rows per lane of fused_ffn_down
  att-groups=1..4096        FUSELM_ATT_GROUPS     workgroups fused_attention aims for (short contexts)
  att-kp=1..18              FUSELM_ATT_KP         Wo passes fused_attention loads first (general)
  att-kp-single=1..18       FUSELM_ATT_KP_SINGLE  the same, single-chunk variant
  att-vp=1..16              FUSELM_ATT_VP         value rows fused_attention loads before the scores
  att-hg=1..4               FUSELM_ATT_HG         query heads per fused_attention workgroup
  head-lanes=32|64|128|256  FUSELM_HEAD_LANES     lanes per row of the output head
  grid-workgroups=N         FUSELM_GRID_WORKGROUPS  workgroups of megakernel-grid (default: measured)
  no-subgroups=0|1          FUSELM_NO_SUBGROUPS   reduce through workgroup memory, not subgroups
  loop-bounding=0|1         FUSELM_SHADER_CHECKS=default  compile with Naga's forced loop bounding";

#[derive(clap::Args, Debug, Default)]
pub struct TuneArgs {
    #[arg(long = "tune", value_name = "NAME=VALUE", long_help = HELP)]
    tune: Vec<String>,
}

impl TuneArgs {
    /// The context options these flags (and the environment) ask for.
    pub fn context_options(&self) -> Result<ContextOptions, Box<dyn Error>> {
        let mut given: Vec<(String, String)> = Vec::new();
        for t in &self.tune {
            let (name, value) = t
                .split_once('=')
                .ok_or_else(|| format!("--tune takes NAME=VALUE, got {t:?}"))?;
            given.push((name.trim().to_string(), value.trim().to_string()));
        }
        let lookup = |name: &str, var: &str| -> Option<String> {
            given
                .iter()
                .rev()
                .find(|(n, _)| n == name)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(var).ok().filter(|v| !v.is_empty()))
        };
        let mut options = ContextOptions::default();
        for (name, var) in KernelTuning::names() {
            if let Some(v) = lookup(name, var) {
                let n = v
                    .parse::<u32>()
                    .map_err(|_| format!("{name}: {v:?} is not a number"))?;
                options.tuning.set(name, n)?;
            }
        }
        options.no_subgroups =
            lookup("no-subgroups", "FUSELM_NO_SUBGROUPS").is_some_and(|v| v != "0");
        options.force_loop_bounding = match given.iter().rev().find(|(n, _)| n == "loop-bounding") {
            Some((_, v)) => v != "0",
            None => match std::env::var("FUSELM_SHADER_CHECKS").as_deref() {
                Ok("default") => true,
                Ok("none") => {
                    return Err("FUSELM_SHADER_CHECKS=none is gone: fuselm's kernels are \
                                always compiled with bounds checks"
                        .into())
                }
                _ => false,
            },
        };
        let known = |n: &str| {
            KernelTuning::names().any(|(k, _)| k == n)
                || n == "no-subgroups"
                || n == "loop-bounding"
        };
        if let Some((n, _)) = given.iter().find(|(n, _)| !known(n)) {
            return Err(format!("--tune: unknown setting {n:?} (see --help)").into());
        }
        Ok(options)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_names_every_parameter() {
        for (name, var) in KernelTuning::names() {
            assert!(HELP.contains(&format!("  {name}=")), "{name}");
            assert!(HELP.contains(var), "{var}");
        }
    }

    #[test]
    fn flags_set_the_options() {
        let args = TuneArgs {
            tune: vec![
                "lanes=64".into(),
                "no-subgroups=1".into(),
                "att-hg=3".into(),
            ],
        };
        let o = args.context_options().expect("valid");
        assert_eq!(o.tuning.lanes, Some(64));
        assert_eq!(o.tuning.attention_heads_per_group, Some(3));
        assert!(o.no_subgroups);
        for bad in ["lanes=48", "lanes", "nope=1", "att-vp=x"] {
            let args = TuneArgs {
                tune: vec![bad.into()],
            };
            assert!(args.context_options().is_err(), "{bad}");
        }
    }
}
