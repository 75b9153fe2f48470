//! Greedy-reference fixtures (`tests/fixtures/exact/<model>/exact_greedy.jsonl` and llama.cpp's
//! `greedy.jsonl`): one JSON object per line with the prompt, its ids, the greedy ids, each
//! step's top-2 margin and the first steps' top-5 `[id, logit]`.

use serde_json::Value;

pub struct GreedyCase {
    pub prompt: String,
    pub prompt_ids: Vec<u32>,
    pub greedy_ids: Vec<u32>,
    pub margins: Vec<f64>,
    /// Per first step, the reference's top-5 `(id, logit)`.
    pub top5: Vec<Vec<(u32, f64)>>,
}

impl GreedyCase {
    /// Generated positions the exact rule compares: up to the first margin below `threshold`.
    pub fn first_below(&self, threshold: f64) -> usize {
        self.margins
            .iter()
            .position(|&m| m < threshold)
            .unwrap_or(self.margins.len())
    }
}

pub fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Every case of a fixture's text.
pub fn greedy_cases(text: &str) -> Vec<GreedyCase> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            GreedyCase {
                prompt: v["prompt"].as_str().unwrap().to_string(),
                prompt_ids: ids(&v["prompt_ids"]),
                greedy_ids: ids(&v["greedy_ids"]),
                margins: v["top2_margin"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|m| m.as_f64().unwrap())
                    .collect(),
                top5: v["top5_first_steps"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|step| {
                        step.as_array()
                            .unwrap()
                            .iter()
                            .map(|p| (p[0].as_u64().unwrap() as u32, p[1].as_f64().unwrap()))
                            .collect()
                    })
                    .collect(),
            }
        })
        .collect()
}
