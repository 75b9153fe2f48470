//! Response formats the constraint tests share, and constrained greedy decoding on the CPU
//! reference model that the GPU strategies are held to.

use fuselm::constraint::{ResponseFormat, TokenAutomaton, VocabBytes};
use fuselm::model::{
    tokenizer_from_gguf, CpuReferenceModel, GenerateOptions, Prompt, StopReason, Strategy,
    TextModel,
};
use serde_json::{json, Value};
use std::sync::Arc;

pub fn schema(v: Value) -> ResponseFormat {
    ResponseFormat::JsonSchema {
        schema: v,
        max_depth: None,
        or_text: None,
    }
}

/// A small, typical extraction schema.
pub fn person() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 12},
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
            "role": {"enum": ["admin", "user", "guest"]},
            "active": {"type": "boolean"}
        },
        "required": ["name", "age", "role"],
        "additionalProperties": false
    })
}

/// A recursive GBNF grammar (parenthesised expressions).
pub const ARITHMETIC: &str = r#"
root ::= expr
# terms joined by operators, blanks optional
expr ::= term (" "? [-+*/] " "? term)*
term ::= [0-9]{1,3} | "(" expr ")"
"#;

/// JSON objects in the style of llama.cpp's grammars/json.gbnf (checked by serde_json).
pub const JSON_GRAMMAR: &str = r#"
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]+)? ws
ws ::= | " " | "\n" [ \t]{0,20}
"#;

/// The CPU reference model's constrained greedy ids after `prompt`: at each step the argmax of
/// the logits among the ids `automaton` allows (ties to the lower id), ending after an
/// end-of-generation id (`eog`), after `max_tokens`, or before the first step whose top-2
/// allowed margin is below `margin` (f32 rounding may choose either there). The model runs
/// incrementally from a reset cache.
pub fn cpu_constrained_greedy(
    cpu: &mut CpuReferenceModel,
    automaton: &TokenAutomaton,
    prompt: &[u32],
    eog: &[u32],
    max_tokens: usize,
    margin: f32,
) -> Vec<u32> {
    cpu.reset();
    let mut logits = cpu.forward(prompt).expect("cpu forward");
    let n_vocab = logits.len() / prompt.len();
    let mut state = automaton.start();
    let mut ids = Vec::new();
    while ids.len() < max_tokens {
        let last = &logits[logits.len() - n_vocab..];
        let mut ranked: Vec<(f32, u32)> = automaton
            .allowed_ids(state)
            .into_iter()
            .map(|i| (last[i as usize], i))
            .collect();
        assert!(!ranked.is_empty(), "the constraint allows no id");
        ranked.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        if ranked.len() > 1 && ranked[0].0 - ranked[1].0 < margin {
            break;
        }
        let id = ranked[0].1;
        ids.push(id);
        if eog.contains(&id) {
            break;
        }
        state = automaton.advance(state, id);
        logits = cpu.forward(&[id]).expect("cpu forward");
    }
    ids
}

/// Holds `strategies`' constrained greedy generations to the CPU reference model's
/// (`cpu_constrained_greedy`) for each chat prompt and format: the GPU's ids (with the stop
/// reason standing for an end-of-generation id) equal the reference's up to its end. Returns one
/// line per generation saying how many ids were compared and why the comparison ended.
#[allow(clippy::too_many_arguments)]
pub async fn constrained_greedy_meets_the_cpu_reference(
    model: &mut TextModel,
    cpu: &mut CpuReferenceModel,
    gguf: &fuselm::gguf::Gguf,
    prompts: &[&str],
    formats: &[ResponseFormat],
    strategies: &[Strategy],
    max_tokens: usize,
    margin: f32,
) -> Vec<String> {
    let tokenizer = tokenizer_from_gguf(gguf).expect("tokenizer");
    let eog = model.stop_ids();
    let vocab = Arc::new(VocabBytes::from_tokenizer(&tokenizer, &eog));
    let mut lines = Vec::new();
    for (f, format) in formats.iter().enumerate() {
        let c = format
            .compile(&vocab)
            .expect("compiles")
            .expect("a constraint");
        for prompt in prompts {
            let mut reference: Option<Vec<u32>> = None;
            for &strategy in strategies {
                let options = GenerateOptions {
                    chat: Some(true),
                    max_tokens: Some(max_tokens as u32),
                    strategy: Some(strategy),
                    response_format: Some(format.clone()),
                    ..Default::default()
                };
                let r = model
                    .generate(Prompt::Text(prompt), &options, &mut |_, _| true)
                    .await
                    .unwrap_or_else(|e| panic!("{strategy:?}, format {f}: {e}"));
                let want = reference.get_or_insert_with(|| {
                    cpu_constrained_greedy(
                        cpu,
                        &c.automaton,
                        &r.prompt_tokens,
                        &eog,
                        max_tokens,
                        margin,
                    )
                });
                let ended = want.last().is_some_and(|id| eog.contains(id));
                let n = want.len() - usize::from(ended);
                assert!(
                    r.tokens.len() >= n,
                    "{strategy:?}, format {f}, {prompt:?}: {} ids, the reference {n}",
                    r.tokens.len()
                );
                assert_eq!(
                    r.tokens[..n],
                    want[..n],
                    "{strategy:?}, format {f}, {prompt:?}"
                );
                if ended {
                    assert_eq!(r.stop_reason, StopReason::EndOfGeneration);
                    assert_eq!(r.tokens.len(), n, "{strategy:?}, format {f}, {prompt:?}");
                }
                let why = if ended {
                    "end of generation"
                } else if n == max_tokens {
                    "length"
                } else {
                    "near tie"
                };
                lines.push(format!(
                    "{strategy:?}, format {f}, {prompt:?}: {n} ids equal the CPU reference's \
                     (then {why}): {:?}",
                    r.text
                ));
            }
        }
    }
    lines
}

/// The formats real models are held to the CPU reference with: an extraction schema, a regex,
/// a recursive grammar and any JSON object.
pub fn real_model_formats() -> Vec<ResponseFormat> {
    vec![
        schema(person()),
        ResponseFormat::Regex {
            pattern: "(Mon|Tue|Wed|Thu|Fri) 20[0-9]{2}-(0[1-9]|1[0-2])-[0-3][0-9]".into(),
        },
        ResponseFormat::Grammar {
            grammar: ARITHMETIC.into(),
            max_depth: Some(3),
        },
        ResponseFormat::JsonObject { max_depth: Some(3) },
    ]
}

/// Chat prompts for `real_model_formats`.
pub const REAL_MODEL_PROMPTS: [&str; 2] = [
    "Alice Smith is a 34-year-old administrator; her account is active. Describe her as JSON.",
    "The meeting was on Friday, 14 March 2025. Give its weekday and date.",
];

/// `constrained_greedy_meets_the_cpu_reference` for a model file on every strategy the GPU can
/// run it with, on the real-model prompts and formats (48 ids each at most; margin 0.01, the
/// exact reference's rule), printing each comparison. Native (the CPU reference dequantizes the
/// whole model).
#[cfg(not(target_arch = "wasm32"))]
pub fn real_model_meets_the_cpu_reference(bytes: &[u8], n_ctx: u32) {
    let gguf = fuselm::gguf::Gguf::parse(bytes).expect("gguf");
    let mut cpu = CpuReferenceModel::from_gguf_ctx(&gguf, bytes, n_ctx).expect("cpu model");
    pollster::block_on(async {
        let ctx = fuselm::gpu::GpuContext::new().await.expect("gpu");
        let options = fuselm::model::LoadOptions {
            n_ctx: Some(n_ctx),
            max_batch: Some(64),
            kv_f16: Some(false),
            strategy: None,
        };
        let mut model = TextModel::load(ctx, bytes, &options).await.expect("load");
        let strategies: Vec<Strategy> = Strategy::ALL
            .iter()
            .copied()
            .filter(|&s| match model.gpu().check_strategy(s) {
                Ok(()) => true,
                Err(e) => {
                    println!("{s:?} cannot run this model: {e}");
                    false
                }
            })
            .collect();
        assert!(strategies.contains(&Strategy::Fused));
        let lines = constrained_greedy_meets_the_cpu_reference(
            &mut model,
            &mut cpu,
            &gguf,
            &REAL_MODEL_PROMPTS,
            &real_model_formats(),
            &strategies,
            48,
            0.01,
        )
        .await;
        for line in lines {
            println!("{line}");
        }
    });
}
