//! `fuselm sim-bench [--runs N] [--populations 1000,10000] [--episodes 200,500,1500]
//! [--envs pendulum,acrobot] [--policy mlp:16] [--out FILE]`: population rollouts, fused vs
//! unfused side by side (`fuselm::sim::bench`), with the adapter report, date and commit.

use fuselm::sim::bench::{sim_bench, SimBenchOptions};
use fuselm::sim::{Env, Policy};
use std::error::Error;
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct SimBenchArgs {
    /// Measured runs per configuration (after one warm-up).
    #[arg(long, default_value_t = 5)]
    runs: u32,
    /// Populations, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [1000u32, 10_000])]
    populations: Vec<u32>,
    /// Episode lengths, comma-separated.
    #[arg(long, value_delimiter = ',', default_values_t = [200u32, 500, 1500])]
    episodes: Vec<u32>,
    /// Environments: cartpole, acrobot, mountain-car, pendulum.
    #[arg(long, value_delimiter = ',', default_values_t = ["pendulum".to_string(), "acrobot".to_string()])]
    envs: Vec<String>,
    /// Policy: linear, mlp:H (tanh MLP with H hidden units) or rnn:H. A linear policy gives
    /// the environment's own floor: the shortest per-step chain a policy can add.
    #[arg(long, default_value = "mlp:16")]
    policy: String,
    /// Write the JSON here (else stdout).
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: SimBenchArgs) -> Result<(), Box<dyn Error>> {
    pollster::block_on(run_async(args))
}

async fn run_async(args: SimBenchArgs) -> Result<(), Box<dyn Error>> {
    let envs = args
        .envs
        .iter()
        .map(|e| match e.as_str() {
            "cartpole" => Ok(Env::CartPole),
            "acrobot" => Ok(Env::Acrobot),
            "mountain-car" => Ok(Env::MountainCar),
            "pendulum" => Ok(Env::Pendulum),
            other => Err(format!("unknown environment {other}")),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let policy = match args.policy.split_once(':') {
        None if args.policy == "linear" => Policy::Linear,
        Some(("mlp", h)) => Policy::Mlp { hidden: h.parse()? },
        Some(("rnn", h)) => Policy::Recurrent { hidden: h.parse()? },
        _ => return Err(format!("unknown policy {} (linear, mlp:H, rnn:H)", args.policy).into()),
    };
    let adapter = fuselm::probe::probe(&fuselm::probe::ProbeOptions::default()).await?;
    let ctx = fuselm::gpu::GpuContext::new().await?;
    let options = SimBenchOptions {
        envs: Some(envs),
        policy: Some(policy),
        populations: Some(args.populations),
        episode_lengths: Some(args.episodes),
        runs: Some(args.runs),
    };
    let report = sim_bench(&ctx, &options).await?;
    let out = serde_json::json!({
        "kind": "sim-bench",
        "date": super::bench_cmd::today(),
        "commit": super::bench_cmd::commit(),
        "device": adapter,
        "report": report,
    });
    let text = serde_json::to_string_pretty(&out)?;
    match &args.out {
        Some(p) => std::fs::write(p, text)?,
        None => out!("{text}"),
    }
    eprintln!("{}", report.markdown);
    Ok(())
}
