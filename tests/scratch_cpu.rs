#![cfg(not(target_arch = "wasm32"))]
mod common;
use fuselm::model::cpu_reference::Numerics;
#[test]
fn scratch() {
    let bytes = std::fs::read(common::default_model()).unwrap();
    let g = fuselm::gguf::Gguf::parse(&bytes).unwrap();
    let mut m = fuselm::model::CpuReferenceModel::from_gguf(&g, &bytes).unwrap();
    let v = 49152;
    let fixtures: Vec<serde_json::Value> =
        std::fs::read_to_string("tests/fixtures/llama.cpp/smollm2/greedy.jsonl")
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
    for numerics in [Numerics::ExactF32, Numerics::LlamaCpp] {
        m.numerics = numerics;
        let mut maxd = 0f32;
        let mut sumd = 0f32;
        let mut cnt = 0;
        for f in &fixtures {
            let p: Vec<u32> = f["prompt_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect();
            let gids: Vec<u32> = f["greedy_ids"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_u64().unwrap() as u32)
                .collect();
            let seq: Vec<u32> = p.iter().chain(&gids[..4]).copied().collect();
            m.reset();
            let logits = m.forward(&seq).unwrap();
            for (i, step) in f["top5_first_steps"].as_array().unwrap().iter().enumerate() {
                let row = &logits[(p.len() + i - 1) * v..(p.len() + i) * v];
                for pair in step.as_array().unwrap() {
                    let id = pair[0].as_u64().unwrap() as usize;
                    let want = pair[1].as_f64().unwrap() as f32;
                    let d = (row[id] - want).abs();
                    maxd = maxd.max(d);
                    sumd += d;
                    cnt += 1;
                }
            }
        }
        println!(
            "{numerics:?}: top5 first steps max diff {maxd:.4} mean {:.4}",
            sumd / cnt as f32
        );
    }
}
