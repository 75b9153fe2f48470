//! Exactness against llama.cpp: `shared/fixtures/smollm2/{tokenize,chat_template}.jsonl`
//! were produced by llama.cpp and jinja2 from SmolLM2-135M-Instruct.
//!
//! The vocabulary comes from the model file, which is not committed. Until the GGUF
//! reader builds a `VocabSpec` directly, the test loads the `tokenizer.*` metadata as
//! JSON from `$FUSELM_VOCAB_JSON` (keys as in GGUF: "tokenizer.ggml.tokens", ...) and
//! is skipped without it. `check_fixtures` / `check_chat_template_fixtures` take any
//! `Tokenizer`, so the GGUF-based test only has to build one and call them.

// Reads files / uses serde_json, which the crate has on native targets only.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

use fuselm::chat_template::{ChatMessage, ChatTemplate};
use fuselm::tokenizer::{StreamDecoder, Tokenizer, VocabSpec};
use serde_json::Value;

fn fixtures_dir() -> PathBuf {
    match std::env::var_os("FUSELM_FIXTURES_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/llama.cpp/smollm2"),
    }
}

fn read_jsonl(name: &str) -> Vec<Value> {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// Every `tokenize.jsonl` case: exact ids, lossless decode, streaming decode.
pub fn check_fixtures(tok: &Tokenizer) {
    let cases = read_jsonl("tokenize.jsonl");
    assert!(!cases.is_empty());
    for case in &cases {
        let text = case["text"].as_str().unwrap();
        let want = ids(&case["ids"]);
        assert_eq!(tok.encode(text, false, true), want, "ids of {text:?}");
        assert_eq!(tok.decode(&want, true).unwrap(), text, "decode of {text:?}");
        let mut stream = StreamDecoder::new(true);
        let mut streamed: String = want.iter().filter_map(|&id| stream.push(tok, id)).collect();
        streamed.push_str(&stream.finish());
        assert_eq!(streamed, text, "streamed decode of {text:?}");
    }
}

/// Every `chat_template.jsonl` case: the rendered prompt byte for byte, and its ids.
pub fn check_chat_template_fixtures(tok: &Tokenizer) {
    let source = tok
        .chat_template()
        .expect("the vocabulary has a chat template");
    let template = ChatTemplate::new(source, tok.bos_text(), tok.eos_text()).unwrap();
    for case in read_jsonl("chat_template.jsonl") {
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let add_gen = case["add_generation_prompt"].as_bool().unwrap();
        let rendered = template.render(&messages, add_gen).unwrap();
        assert_eq!(rendered, case["rendered"].as_str().unwrap());
        assert_eq!(tok.encode(&rendered, false, true), ids(&case["ids"]));
    }
}

/// A `VocabSpec` from GGUF `tokenizer.*` metadata dumped as a JSON object.
pub fn spec_from_metadata_json(json: &Value) -> VocabSpec {
    let get = |k: &str| json.get(format!("tokenizer.{k}").as_str());
    let strings = |k: &str| {
        get(k)
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
    };
    let id = |k: &str| get(k).and_then(Value::as_u64).map(|v| v as u32);
    let flag = |k: &str| get(k).and_then(Value::as_bool);
    VocabSpec {
        model: get("ggml.model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        pre: get("ggml.pre").and_then(Value::as_str).map(str::to_string),
        tokens: strings("ggml.tokens").unwrap_or_default(),
        token_types: get("ggml.token_type")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|t| t.as_i64().unwrap() as i32).collect()),
        scores: get("ggml.scores")
            .and_then(Value::as_array)
            .map(|a| a.iter().map(|t| t.as_f64().unwrap() as f32).collect()),
        merges: strings("ggml.merges"),
        bos: id("ggml.bos_token_id"),
        eos: id("ggml.eos_token_id"),
        eot: id("ggml.eot_token_id"),
        eom: id("ggml.eom_token_id"),
        unk: id("ggml.unknown_token_id"),
        pad: id("ggml.padding_token_id"),
        add_bos: flag("ggml.add_bos_token"),
        add_eos: flag("ggml.add_eos_token"),
        add_space_prefix: flag("ggml.add_space_prefix"),
        chat_template: get("chat_template")
            .and_then(Value::as_str)
            .map(str::to_string),
    }
}

fn smollm2_from_json() -> Option<Tokenizer> {
    let Some(path) = std::env::var_os("FUSELM_VOCAB_JSON") else {
        eprintln!("skipped: set FUSELM_VOCAB_JSON to SmolLM2's tokenizer metadata as JSON");
        return None;
    };
    let json: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    Some(Tokenizer::from_spec(spec_from_metadata_json(&json)).unwrap())
}

#[test]
fn smollm2_tokenize_fixtures() {
    if let Some(tok) = smollm2_from_json() {
        let s = tok.summary();
        assert_eq!(
            (s.model.as_str(), s.pre.as_deref(), s.vocab_size),
            ("gpt2", Some("smollm"), 49152)
        );
        assert_eq!((s.bos, s.eos, s.add_bos), (Some(1), Some(2), false));
        assert!(tok.is_eog(2) && tok.is_eog(0) && !tok.is_eog(1));
        check_fixtures(&tok);
    }
}

#[test]
fn smollm2_chat_template_fixtures() {
    if let Some(tok) = smollm2_from_json() {
        check_chat_template_fixtures(&tok);
    }
}
