//! Fuzzes what a model file's text reaches: a chat template (a program from the file) rendered
//! with fuzzed messages under the same bounds the text model uses, and tokenization of the
//! rendered prompt and of raw text by a byte-level BPE vocabulary (with control and user-defined
//! tokens) and a SentencePiece one. Properties beyond "no panic, no hang, no allocation past
//! libFuzzer's limits": a render either succeeds within its output limit or fails with a typed
//! error; byte-level BPE round-trips any text (decode(encode(s)) == s).
//!
//! Input: template source, then NUL, then message content, then NUL, then text to tokenize.
//! Run: `scripts/fuzz template_tokenizer` (`-runs=N` and other libFuzzer flags after it).
#![no_main]

use std::sync::OnceLock;

use fuselm::chat_template::{ChatMessage, ChatTemplate};
use fuselm::tokenizer::{Tokenizer, VocabSpec};
use libfuzzer_sys::fuzz_target;

/// The output limit of a render: what a 4,096-token context of 16-byte tokens could hold.
const MAX_OUTPUT: usize = 4096 * 16;

fn bpe() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| {
        let mut tokens = fuselm::tokenizer::byte_level_alphabet();
        let mut types = vec![1; 256];
        let merges = ["Ġ t", "h e", "Ġt he", "i n", "Ġ a", "e r", "o n", "Ġ {", "{ %", "% }"];
        for m in merges {
            tokens.push(m.replace(' ', ""));
            types.push(1);
        }
        for (text, ty) in [
            ("<|im_start|>", 3),
            ("<|im_end|>", 3),
            ("<|im_end|>x", 3),
            ("<|endoftext|>", 3),
            ("<tool>", 4),
            ("</tool>", 4),
        ] {
            tokens.push(text.into());
            types.push(ty);
        }
        Tokenizer::from_spec(VocabSpec {
            model: "gpt2".into(),
            pre: Some("smollm".into()),
            tokens,
            token_types: Some(types),
            merges: Some(merges.iter().map(|m| m.to_string()).collect()),
            bos: Some(268),
            eos: Some(269),
            ..Default::default()
        })
        .expect("fuzz BPE vocabulary")
    })
}

fn spm() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| {
        let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
        let mut types = vec![2, 3, 3];
        let mut scores = vec![0.0, 0.0, 0.0];
        for b in 0..=255u8 {
            tokens.push(format!("<0x{b:02X}>"));
            types.push(6);
            scores.push(0.0);
        }
        for (i, piece) in ["▁", "▁t", "he", "▁the", "in", "er", "▁a", "on", "{%", "%}"].iter().enumerate() {
            tokens.push(piece.to_string());
            types.push(1);
            scores.push(-(i as f32));
        }
        Tokenizer::from_spec(VocabSpec {
            model: "llama".into(),
            tokens,
            token_types: Some(types),
            scores: Some(scores),
            ..Default::default()
        })
        .expect("fuzz SPM vocabulary")
    })
}

fuzz_target!(|data: &[u8]| {
    let mut parts = data.splitn(3, |&b| b == 0);
    let source = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let content = String::from_utf8_lossy(parts.next().unwrap_or_default());
    let text = String::from_utf8_lossy(parts.next().unwrap_or_default());

    if let Ok(template) = ChatTemplate::new(&source, "<s>", "</s>") {
        let messages = [
            ChatMessage::new("system", "Be brief."),
            ChatMessage::new("user", content.as_ref()),
        ];
        if let Ok(prompt) = template.render_limited(&messages, true, MAX_OUTPUT) {
            assert!(prompt.len() <= MAX_OUTPUT, "render passed its output limit");
            let ids = bpe().encode(&prompt, true, true);
            assert!(ids.len() <= prompt.len() + 2);
        }
    }

    for tok in [bpe(), spm()] {
        for parse_special in [false, true] {
            let ids = tok.encode(&text, true, parse_special);
            let _ = tok.decode_lossy(&ids, true);
        }
    }
    // Byte-level BPE loses nothing: plain text comes back byte for byte.
    let ids = bpe().encode(&text, false, false);
    let back = bpe().decode(&ids, true).expect("BPE ids decode");
    assert_eq!(back, text, "BPE round trip");
});
