//! The llama.cpp and exact reference outputs under tests/fixtures/ are verbatim copies of the
//! project's shared fixtures (copied so that a clean clone is self-contained). Where the shared
//! folder exists beside the checkout, the copies must be byte-identical.
#![cfg(not(target_arch = "wasm32"))]

use std::path::PathBuf;

#[test]
fn fixture_copies_match_the_shared_originals() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let shared = root.join("../shared/fixtures");
    if !shared.exists() {
        eprintln!("skip: {} not present on this machine", shared.display());
        return;
    }
    for name in [
        "tokenize.jsonl",
        "chat_template.jsonl",
        "greedy.jsonl",
        "meta.json",
    ] {
        let original = std::fs::read(shared.join("smollm2").join(name)).expect("shared fixture");
        let copy = std::fs::read(root.join("tests/fixtures/llama.cpp/smollm2").join(name))
            .expect("copied fixture");
        assert!(original == copy, "{name} differs from the shared original");
    }
    for name in ["exact_greedy.jsonl", "exact_meta.json"] {
        let original = std::fs::read(shared.join("smollm2").join(name)).expect("shared fixture");
        let copy = std::fs::read(root.join("tests/fixtures/exact/smollm2").join(name))
            .expect("copied fixture");
        assert!(original == copy, "{name} differs from the shared original");
    }
}
