//! Time to first token of a multi-turn chat, with the KV cache of the earlier turns reused
//! (`reuse_prefix`, what `chat.completions` does by default) and with every turn prefilled from
//! scratch — the same conversation, the same answers, in one process.
//!
//! `cargo run --release --example chat_ttft -- MODEL.gguf [RUNS] [OUT.json]`

use fuselm::chat_template::ChatMessage;
use fuselm::gpu::GpuContext;
use fuselm::model::{GenerateOptions, LoadOptions, Prompt, TextModel};

const TURNS: [&str; 4] = [
    "What is WebGPU?",
    "How is it different from WebGL?",
    "Name one thing a compute shader can do that a fragment shader cannot.",
    "Summarize our conversation in one sentence.",
];

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s[s.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let path = args
        .get(1)
        .ok_or("usage: chat_ttft MODEL.gguf [RUNS] [OUT.json]")?;
    let runs: usize = args.get(2).map_or(Ok(5), |s| s.parse())?;
    let bytes = std::fs::read(path)?;
    pollster::block_on(async {
        let ctx = GpuContext::new().await?;
        let adapter = ctx.info.name.clone();
        let load = LoadOptions {
            n_ctx: Some(1024),
            ..Default::default()
        };
        let mut model = TextModel::load(ctx, &bytes, &load).await?;
        let mut rows = Vec::new();
        for reuse in [true, false] {
            // [turn] -> (prompt tokens, reused tokens, ttft samples, answer)
            let mut per_turn: Vec<(usize, u32, Vec<f64>, String)> = Vec::new();
            for run in 0..=runs {
                let mut messages: Vec<ChatMessage> = Vec::new();
                for (i, turn) in TURNS.iter().enumerate() {
                    messages.push(ChatMessage::new("user", *turn));
                    let options = GenerateOptions {
                        max_tokens: Some(48),
                        reuse_prefix: Some(reuse),
                        ..Default::default()
                    };
                    let r = model
                        .generate(Prompt::Messages(&messages), &options, &mut |_, _| true)
                        .await?;
                    messages.push(ChatMessage::new("assistant", r.text.as_str()));
                    if run == 0 {
                        continue; // warm-up
                    }
                    if per_turn.len() <= i {
                        per_turn.push((
                            r.prompt_tokens.len(),
                            r.reused_prompt_tokens,
                            Vec::new(),
                            r.text.clone(),
                        ));
                    }
                    per_turn[i].2.push(r.timings.prefill_seconds * 1e3);
                }
            }
            for (i, (prompt, reused, ttft, answer)) in per_turn.into_iter().enumerate() {
                rows.push(serde_json::json!({
                    "reusePrefix": reuse, "turn": i + 1, "promptTokens": prompt, "reusedTokens": reused,
                    "ttftMs": { "median": median(&ttft), "min": ttft.iter().cloned().fold(f64::MAX, f64::min),
                                "max": ttft.iter().cloned().fold(0.0, f64::max) },
                    "answer": answer,
                }));
            }
        }
        for r in &rows {
            println!(
                "reuse {:5} turn {}: {:>3} prompt tokens, {:>3} reused: TTFT {:.2} ms",
                r["reusePrefix"],
                r["turn"],
                r["promptTokens"],
                r["reusedTokens"],
                r["ttftMs"]["median"].as_f64().unwrap_or(0.0)
            );
        }
        let out = serde_json::json!({ "kind": "chat-ttft", "adapter": adapter, "runs": runs, "rows": rows });
        if let Some(p) = args.get(3) {
            std::fs::write(p, serde_json::to_string_pretty(&out)?)?;
        }
        Ok::<_, Box<dyn std::error::Error>>(())
    })
}
