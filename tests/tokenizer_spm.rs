//! The SentencePiece-style ("llama") model on a small hand-built vocabulary: score
//! priority, byte fallback, the `▁` space prefix, special tokens, decode round trips.
//!
//! Native only (the native lane owns this); in the browser, the same wasm32 build of the tokenizer
//! runs through the SDK (tests/sdk, tests/site/chat.test.mjs).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use fuselm::tokenizer::{Tokenizer, TokenizerError, VocabSpec};

/// `<unk> <s> </s>`, the 256 byte tokens, then `pieces` (text, score) as normal tokens.
fn spm(pieces: &[(&str, f32)]) -> VocabSpec {
    let mut tokens = vec!["<unk>".to_string(), "<s>".into(), "</s>".into()];
    let mut types = vec![2, 3, 3];
    let mut scores = vec![0.0, 0.0, 0.0];
    for b in 0..=255u8 {
        tokens.push(format!("<0x{b:02X}>"));
        types.push(6);
        scores.push(0.0);
    }
    for (text, score) in pieces {
        tokens.push(text.to_string());
        types.push(1);
        scores.push(*score);
    }
    VocabSpec {
        model: "llama".into(),
        tokens,
        token_types: Some(types),
        scores: Some(scores),
        ..Default::default()
    }
}

fn id(tok: &Tokenizer, text: &str) -> u32 {
    tok.token_id(text).unwrap()
}

const HELLO_WORLD: &[(&str, f32)] = &[
    ("▁", -10.0),
    ("h", -10.0),
    ("e", -10.0),
    ("l", -10.0),
    ("o", -10.0),
    ("w", -10.0),
    ("r", -10.0),
    ("d", -10.0),
    ("▁h", -1.0),
    ("ll", -2.0),
    ("▁he", -3.0),
    ("llo", -4.0),
    ("▁hello", -0.5),
    ("▁w", -1.5),
    ("or", -2.5),
    ("▁wor", -3.5),
    ("ld", -2.2),
    ("▁world", -0.7),
];

fn check_merges_whole_words_with_bos_and_space_prefix() {
    let tok = Tokenizer::from_spec(spm(HELLO_WORLD)).unwrap();
    assert!(tok.add_bos()); // llama default
    let ids = tok.encode("hello world", true, false);
    assert_eq!(ids, vec![1, id(&tok, "▁hello"), id(&tok, "▁world")]);
    assert_eq!(tok.encode("hello world", false, false), ids[1..]);
    // The prefixed space is dropped again on decode; BOS renders only when asked.
    assert_eq!(tok.decode(&ids, false).unwrap(), "hello world");
    assert_eq!(tok.decode(&ids, true).unwrap(), "<s>hello world");
    assert_eq!(tok.encode("", true, false), vec![1]);
    assert_eq!(tok.encode("", false, false), Vec::<u32>::new());
}
cross_test!(
    merges_whole_words_with_bos_and_space_prefix,
    check_merges_whole_words_with_bos_and_space_prefix
);

fn check_highest_score_merges_first_and_ties_go_left() {
    let base = [("a", -9.0), ("b", -9.0), ("c", -9.0), ("▁", -9.0)];
    let with = |ab: f32, bc: f32| {
        let mut pieces = base.to_vec();
        pieces.extend([("ab", ab), ("bc", bc)]);
        let mut spec = spm(&pieces);
        spec.add_space_prefix = Some(false);
        Tokenizer::from_spec(spec).unwrap()
    };
    let tok = with(-1.0, -0.5);
    assert_eq!(
        tok.encode("abc", false, false),
        vec![id(&tok, "a"), id(&tok, "bc")]
    );
    let tok = with(-0.5, -1.0);
    assert_eq!(
        tok.encode("abc", false, false),
        vec![id(&tok, "ab"), id(&tok, "c")]
    );
    let tok = with(-1.0, -1.0);
    assert_eq!(
        tok.encode("abc", false, false),
        vec![id(&tok, "ab"), id(&tok, "c")]
    );
}
cross_test!(
    highest_score_merges_first_and_ties_go_left,
    check_highest_score_merges_first_and_ties_go_left
);

fn check_unknown_characters_fall_back_to_bytes() {
    let tok = Tokenizer::from_spec(spm(HELLO_WORLD)).unwrap();
    // 'é' is C3 A9 and '🚀' F0 9F 9A 80; neither is a piece.
    let ids = tok.encode("hello é🚀", false, false);
    let bytes = |bs: &[u8]| {
        bs.iter()
            .map(|b| id(&tok, &format!("<0x{b:02X}>")))
            .collect::<Vec<_>>()
    };
    let mut want = vec![id(&tok, "▁hello"), id(&tok, "▁")];
    want.extend(bytes(&[0xC3, 0xA9, 0xF0, 0x9F, 0x9A, 0x80]));
    assert_eq!(ids, want);
    assert_eq!(tok.decode(&ids, false).unwrap(), "hello é🚀");
    // Cut inside the emoji: strict decode refuses, lossy decode replaces.
    assert!(matches!(
        tok.decode(&ids[..ids.len() - 1], false),
        Err(TokenizerError::InvalidUtf8 { .. })
    ));
    assert_eq!(
        tok.decode_lossy(&ids[..ids.len() - 1], false),
        "hello é\u{FFFD}"
    );
}
cross_test!(
    unknown_characters_fall_back_to_bytes,
    check_unknown_characters_fall_back_to_bytes
);

fn check_special_tokens_split_text_and_restart_the_space_prefix() {
    let tok = Tokenizer::from_spec(spm(HELLO_WORLD)).unwrap();
    let ids = tok.encode("hello</s>world", false, true);
    assert_eq!(ids, vec![id(&tok, "▁hello"), 2, id(&tok, "▁world")]);
    assert_eq!(tok.decode(&ids, true).unwrap(), "hello</s> world");
    // Without parse_special the control token is just text (bytes here).
    assert!(!tok.encode("hello</s>world", false, false).contains(&2));
}
cross_test!(
    special_tokens_split_text_and_restart_the_space_prefix,
    check_special_tokens_split_text_and_restart_the_space_prefix
);

fn check_metadata_overrides_defaults() {
    let mut spec = spm(HELLO_WORLD);
    spec.add_bos = Some(false);
    spec.add_eos = Some(true);
    spec.add_space_prefix = Some(false);
    let tok = Tokenizer::from_spec(spec).unwrap();
    let ids = tok.encode("hello", true, false);
    // No prefix, so no "▁hello": only "ll" then "llo" merge.
    assert_eq!(ids, vec![id(&tok, "h"), id(&tok, "e"), id(&tok, "llo"), 2]);
    assert!(tok.is_eog(2));
    assert_eq!(tok.decode(&ids, false).unwrap(), "hello");
}
cross_test!(
    metadata_overrides_defaults,
    check_metadata_overrides_defaults
);

fn check_vocabulary_without_byte_tokens_uses_unk() {
    let spec = VocabSpec {
        model: "llama".into(),
        tokens: vec![
            "<unk>".into(),
            "<s>".into(),
            "</s>".into(),
            "▁".into(),
            "a".into(),
        ],
        token_types: Some(vec![2, 3, 3, 1, 1]),
        ..Default::default()
    };
    let tok = Tokenizer::from_spec(spec).unwrap();
    assert_eq!(tok.encode("aé", false, false), vec![3, 4, 0, 0]);
    assert_eq!(tok.decode(&[3, 4, 0], false).unwrap(), "a");
    assert_eq!(tok.decode(&[3, 4, 0], true).unwrap(), "a<unk>");
}
cross_test!(
    vocabulary_without_byte_tokens_uses_unk,
    check_vocabulary_without_byte_tokens_uses_unk
);
