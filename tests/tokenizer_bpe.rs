//! Byte-level BPE on a small hand-built vocabulary: special-token matching, hostile
//! input, decode errors, streaming. (Exactness against llama.cpp on a real vocabulary
//! is `tokenizer_fixtures.rs`.)
//!
//! Native only (the native lane owns this); in the browser, the SDK tokenizes and detokenizes
//! (tests/sdk: tokenize/detokenize; tests/site/chat.test.mjs: SmolLM2's prompt ids
//! equal the exact reference's).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use fuselm::tokenizer::{StreamDecoder, TokenKind, Tokenizer, TokenizerError, VocabSpec};

/// GPT-2's printable form of a byte.
fn byte_char(b: u8) -> char {
    let direct = |b: u8| matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
    if direct(b) {
        return char::from(b);
    }
    let nth = (0..b).filter(|x| !direct(*x)).count() as u32;
    char::from_u32(256 + nth).unwrap()
}

/// All 256 byte tokens, a few merges, and special tokens (ids from 256 + merges).
fn spec() -> VocabSpec {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    let mut types = vec![1; 256];
    let merges = ["Ġ w", "o r", "Ġw or", "l d", "Ġwor ld", "a a", "aa aa"];
    for m in merges {
        tokens.push(m.replace(' ', ""));
        types.push(1);
    }
    for (text, ty) in [
        ("<|im_start|>", 3),
        ("<|im_end|>", 3),
        ("<|im_end|>x", 3),
        ("<tool>", 4),
    ] {
        tokens.push(text.into());
        types.push(ty);
    }
    VocabSpec {
        model: "gpt2".into(),
        pre: Some("smollm".into()),
        tokens,
        token_types: Some(types),
        merges: Some(merges.iter().map(|m| m.to_string()).collect()),
        bos: Some(263),
        eos: Some(264),
        ..Default::default()
    }
}

fn tok() -> Tokenizer {
    Tokenizer::from_spec(spec()).unwrap()
}

fn check_merges_follow_ranks() {
    let tok = tok();
    let world = tok.token_id("Ġworld").unwrap();
    assert_eq!(tok.encode(" world", false, false), vec![world]);
    assert_eq!(
        tok.encode("aaaaa", false, false),
        vec![tok.token_id("aaaa").unwrap(), u32::from(b'a')]
    );
}
cross_test!(merges_follow_ranks, check_merges_follow_ranks);

fn check_special_tokens_longest_first_and_only_when_asked() {
    let tok = tok();
    let (start, end, end_x, tool) = (263, 264, 265, 266);
    assert_eq!(tok.encode("<|im_start|>", false, true), vec![start]);
    // "<|im_end|>x" is longer than "<|im_end|>", so it wins.
    assert_eq!(
        tok.encode("a<|im_end|>x<|im_end|>", false, true),
        vec![u32::from(b'a'), end_x, end]
    );
    // Control tokens stay text without parse_special; user-defined ones always match.
    let plain = tok.encode("<|im_end|><tool>", false, false);
    assert!(!plain.contains(&end) && plain.ends_with(&[tool]));
    assert_eq!(tok.decode(&plain, true).unwrap(), "<|im_end|><tool>");
    assert_eq!(tok.token_kind(end), Some(TokenKind::Control));
    // Control tokens render only when asked; user-defined ones always do.
    assert_eq!(tok.decode(&[start, tool, end], false).unwrap(), "<tool>");
    assert_eq!(
        tok.decode(&[start, tool, end], true).unwrap(),
        "<|im_start|><tool><|im_end|>"
    );
    assert!(tok.is_eog(end)); // by its text, as llama.cpp
}
cross_test!(
    special_tokens_longest_first_and_only_when_asked,
    check_special_tokens_longest_first_and_only_when_asked
);

fn check_bos_eos_follow_metadata() {
    let mut spec = spec();
    assert_eq!(tok().encode("a", true, false), vec![u32::from(b'a')]); // gpt2: add_bos defaults off
    spec.add_bos = Some(true);
    spec.add_eos = Some(true);
    let tok = Tokenizer::from_spec(spec.clone()).unwrap();
    assert_eq!(
        tok.encode("a", true, false),
        vec![263, u32::from(b'a'), 264]
    );
    assert_eq!(tok.encode("a", false, false), vec![u32::from(b'a')]);
    spec.bos = Some(1_000_000); // out of range, falls back to llama.cpp's default 11
    assert_eq!(Tokenizer::from_spec(spec).unwrap().bos(), Some(11));
}
cross_test!(bos_eos_follow_metadata, check_bos_eos_follow_metadata);

fn check_round_trips_any_text() {
    let tok = tok();
    for text in [
        "",
        " ",
        "\n\n\t \r\n",
        "naïve café 日本語 🚀🔥👍🏽",
        "x\u{0}y\u{7f}\u{ad}",
        "  a  b  ",
        "0123456789",
    ] {
        let ids = tok.encode(text, false, true);
        assert_eq!(tok.decode(&ids, true).unwrap(), text);
    }
    assert!(tok.encode("", true, true).is_empty());
}
cross_test!(round_trips_any_text, check_round_trips_any_text);

fn check_long_input() {
    let tok = tok();
    let long = "a".repeat(200_000);
    let ids = tok.encode(&long, false, false);
    assert_eq!(ids.len(), 50_000);
    let mixed = "Hello, wörld! 123 🚀\n".repeat(5_000);
    assert_eq!(
        tok.decode(&tok.encode(&mixed, false, true), true).unwrap(),
        mixed
    );
}
cross_test!(long_input, check_long_input);

fn check_decode_errors_are_typed() {
    let tok = tok();
    assert_eq!(
        tok.decode(&[u32::from(b'a'), 9_999], true),
        Err(TokenizerError::UnknownTokenId {
            id: 9_999,
            vocab_size: tok.vocab_size()
        })
    );
    assert_eq!(
        tok.decode_lossy(&[u32::from(b'a'), 9_999, u32::MAX], true),
        "a"
    );
    assert!(tok.token_to_piece(u32::MAX, true).is_err());
    // A lone continuation byte is not UTF-8.
    let ids = [u32::from(b'a'), 0x80];
    assert_eq!(
        tok.decode(&ids, true),
        Err(TokenizerError::InvalidUtf8 { valid_up_to: 1 })
    );
    assert_eq!(tok.decode_lossy(&ids, true), "a\u{FFFD}");
    assert_eq!(tok.decode_bytes(&ids, true).unwrap(), vec![b'a', 0x80]);
}
cross_test!(decode_errors_are_typed, check_decode_errors_are_typed);

fn check_stream_decoder_waits_for_whole_characters() {
    let tok = tok();
    let ids = tok.encode("🚀é!", false, false); // all byte tokens here
    assert_eq!(ids.len(), 7);
    let mut d = StreamDecoder::new(false);
    let out: Vec<Option<String>> = ids.iter().map(|&id| d.push(&tok, id)).collect();
    assert_eq!(
        out,
        vec![
            None,
            None,
            None,
            Some("🚀".into()),
            None,
            Some("é".into()),
            Some("!".into())
        ]
    );
    // Unknown ids add nothing; a cut character is flushed as U+FFFD.
    assert_eq!(d.push(&tok, 123_456), None);
    assert_eq!(d.push(&tok, ids[0]), None);
    assert_eq!(d.finish(), "\u{FFFD}");
    // Control tokens are hidden unless asked for.
    assert_eq!(d.push(&tok, 264), None);
    assert_eq!(
        StreamDecoder::new(true).push(&tok, 264).as_deref(),
        Some("<|im_end|>")
    );
}
cross_test!(
    stream_decoder_waits_for_whole_characters,
    check_stream_decoder_waits_for_whole_characters
);

fn check_bad_specs_are_errors_not_panics() {
    let err = |f: fn(&mut VocabSpec)| {
        let mut s = spec();
        f(&mut s);
        Tokenizer::from_spec(s).err()
    };
    assert_eq!(
        err(|s| s.model = "bert".into()),
        Some(TokenizerError::UnsupportedModel("bert".into()))
    );
    assert_eq!(
        err(|s| s.pre = Some("nope".into())),
        Some(TokenizerError::UnsupportedPreTokenizer("nope".into()))
    );
    assert_eq!(
        err(|s| s.merges = None),
        Some(TokenizerError::MissingMerges)
    );
    assert_eq!(err(|s| s.tokens.clear()), Some(TokenizerError::EmptyVocab));
    assert!(matches!(
        err(|s| s.token_types = Some(vec![1])),
        Some(TokenizerError::LengthMismatch { .. })
    ));
    assert_eq!(
        err(|s| {
            s.add_eos = Some(true);
            s.eos = Some(u32::MAX);
            s.tokens.truncate(11); // llama.cpp's default EOS 11 is then out of range too
            s.token_types = None;
        }),
        Some(TokenizerError::MissingSpecialToken("add_eos_token"))
    );
    // Odd but loadable: junk merges, empty and duplicate tokens.
    let mut s = spec();
    s.merges
        .as_mut()
        .unwrap()
        .extend(["nospace".into(), " ".into(), "x y z".into(), "Ġ".into()]);
    s.tokens.extend(["".into(), "a".into()]);
    s.token_types.as_mut().unwrap().extend([3, 3]);
    let tok = Tokenizer::from_spec(s).unwrap();
    assert_eq!(
        tok.decode(&tok.encode("x y z a", false, true), true)
            .unwrap(),
        "x y z a"
    );
}
cross_test!(
    bad_specs_are_errors_not_panics,
    check_bad_specs_are_errors_not_panics
);

/// A normal byte-level token decodes each character outside GPT-2's byte alphabet as
/// `[UNK_BYTE_0x..<the whole text>]` (llama.cpp's rendering, kept where it is small): a 40,000-
/// character token of them would decode to 1.6 GB at load, so such a vocabulary is refused with a
/// typed error instead; one short token of them still loads, rendered as llama.cpp does.
fn check_tokens_decoding_past_their_texts_are_bounded() {
    let mut s = spec();
    s.tokens.push("€".repeat(40_000));
    s.token_types.as_mut().unwrap().push(1);
    let start = std::time::Instant::now();
    assert_eq!(
        Tokenizer::from_spec(s).unwrap_err(),
        TokenizerError::PiecesTooLarge { limit: 16 << 20 }
    );
    assert!(start.elapsed().as_secs() < 5, "{:?}", start.elapsed());
    let mut s = spec();
    s.tokens.push("a€".into());
    s.token_types.as_mut().unwrap().push(1);
    let id = s.tokens.len() as u32 - 1;
    let tok = Tokenizer::from_spec(s).unwrap();
    assert_eq!(
        tok.token_to_piece(id, true).unwrap(),
        "a[UNK_BYTE_0xe282aca€]".as_bytes()
    );
}
cross_test!(
    tokens_decoding_past_their_texts_are_bounded,
    check_tokens_decoding_past_their_texts_are_bounded
);
