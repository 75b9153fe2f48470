//! Exactness against llama.cpp: `shared/fixtures/smollm2/{tokenize,chat_template}.jsonl`
//! were produced by llama.cpp and jinja2 from SmolLM2-135M-Instruct (copied verbatim into
//! tests/fixtures/llama.cpp/smollm2, checked by `fixtures_unedited.rs`, and compiled in so the
//! same tests run in the browser).
//!
//! The vocabulary comes from the model file (not committed): natively `common::default_model()`
//! runs `scripts/fetch-model` when it is missing; in the browser it is fetched from
//! `FUSELM_TEST_ASSETS` (see `common::default_model_bytes`). These tests never skip.
//!
//! Native only (the native lane owns this); in the browser, tests/site/chat.test.mjs tokenizes the
//! real SmolLM2 chat prompt and compares it with the exact reference's ids.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use fuselm::chat_template::{ChatMessage, ChatTemplate};
use fuselm::tokenizer::{StreamDecoder, Tokenizer};
use serde_json::Value;

const TOKENIZE_JSONL: &str = include_str!("fixtures/llama.cpp/smollm2/tokenize.jsonl");
const CHAT_TEMPLATE_JSONL: &str = include_str!("fixtures/llama.cpp/smollm2/chat_template.jsonl");

fn read_jsonl(text: &str) -> Vec<Value> {
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
    let cases = read_jsonl(TOKENIZE_JSONL);
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
    for case in read_jsonl(CHAT_TEMPLATE_JSONL) {
        let messages: Vec<ChatMessage> = serde_json::from_value(case["messages"].clone()).unwrap();
        let add_gen = case["add_generation_prompt"].as_bool().unwrap();
        let rendered = template.render(&messages, add_gen).unwrap();
        assert_eq!(rendered, case["rendered"].as_str().unwrap());
        assert_eq!(tok.encode(&rendered, false, true), ids(&case["ids"]));
    }
}

/// SmolLM2's tokenizer, built from the real GGUF file.
async fn smollm2() -> Tokenizer {
    let bytes = common::default_model_bytes().await;
    let gguf = fuselm::gguf::Gguf::parse(&bytes).expect("parse the default model");
    fuselm::model::tokenizer_from_gguf(&gguf).expect("tokenizer from GGUF metadata")
}

async fn smollm2_tokenize() {
    let tok = smollm2().await;
    let s = tok.summary();
    assert_eq!(
        (s.model.as_str(), s.pre.as_deref(), s.vocab_size),
        ("gpt2", Some("smollm"), 49152)
    );
    assert_eq!((s.bos, s.eos, s.add_bos), (Some(1), Some(2), false));
    assert!(tok.is_eog(2) && tok.is_eog(0) && !tok.is_eog(1));
    check_fixtures(&tok);
}
cross_test!(async smollm2_tokenize_fixtures, smollm2_tokenize);

async fn smollm2_chat_template() {
    check_chat_template_fixtures(&smollm2().await);
}
cross_test!(async smollm2_chat_template_fixtures, smollm2_chat_template);
