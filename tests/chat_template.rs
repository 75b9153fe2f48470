//! Chat template rendering with Hugging Face's conventions (the model's own template is
//! checked byte for byte against jinja2 in `tokenizer_fixtures.rs`).
//!
//! Native only (the native lane owns this); in the browser, the chat page renders SmolLM2's
//! template (tests/site/chat.test.mjs: its prompt ids equal the exact reference's).
#![cfg(not(target_arch = "wasm32"))]

mod common;

use fuselm::chat_template::{ChatMessage, ChatTemplate, TemplateError};

const CHATML: &str = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}\
{{ '<|im_start|>system\nBe brief.<|im_end|>\n' }}{% endif %}\
{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}{% endfor %}\
{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}";

fn user(text: &str) -> Vec<ChatMessage> {
    vec![ChatMessage::new("user", text)]
}

fn check_chatml_with_default_system_and_generation_prompt() {
    let t = ChatTemplate::new(CHATML, "<s>", "</s>").unwrap();
    let sys = "<|im_start|>system\nBe brief.<|im_end|>\n";
    let turn = "<|im_start|>user\nHi<|im_end|>\n";
    assert_eq!(
        t.render(&user("Hi"), false).unwrap(),
        format!("{sys}{turn}")
    );
    assert_eq!(
        t.render(&user("Hi"), true).unwrap(),
        format!("{sys}{turn}<|im_start|>assistant\n")
    );
    let own_system = [
        ChatMessage::new("system", "S"),
        ChatMessage::new("user", "Hi"),
    ];
    assert_eq!(
        t.render(&own_system, false).unwrap(),
        format!("<|im_start|>system\nS<|im_end|>\n{turn}")
    );
    assert_eq!(t.render(&[], false).unwrap(), "");
}
cross_test!(
    chatml_with_default_system_and_generation_prompt,
    check_chatml_with_default_system_and_generation_prompt
);

fn check_block_whitespace_is_trimmed_as_in_hugging_face() {
    // trim_blocks + lstrip_blocks: block tags on their own lines leave no blank lines.
    let src = "{{ bos_token }}\n{% for m in messages %}\n    {% if m.role == 'user' %}\n[U] {{ m.content }}\n    {% else %}\n[A] {{ m.content }}{{ eos_token }}\n    {% endif %}\n{% endfor %}\n";
    let t = ChatTemplate::new(src, "<s>", "</s>").unwrap();
    let msgs = [
        ChatMessage::new("user", "q"),
        ChatMessage::new("assistant", "a"),
    ];
    assert_eq!(t.render(&msgs, false).unwrap(), "<s>\n[U] q\n[A] a</s>\n");
}
cross_test!(
    block_whitespace_is_trimmed_as_in_hugging_face,
    check_block_whitespace_is_trimmed_as_in_hugging_face
);

fn check_python_string_methods_and_loop_helpers() {
    let src = "{% for m in messages %}{{ m['content'].strip().upper() }}{% if not loop.last %}|{% endif %}{% endfor %}\
{% set parts = 'a,b'.split(',') %}{{ parts | length }}{{ messages[0].role.startswith('us') }}";
    let t = ChatTemplate::new(src, "", "").unwrap();
    let msgs = [
        ChatMessage::new("user", "  hi "),
        ChatMessage::new("assistant", "yo\n"),
    ];
    // Booleans print the Python way, as in jinja2.
    assert_eq!(t.render(&msgs, false).unwrap(), "HI|YO2True");
}
cross_test!(
    python_string_methods_and_loop_helpers,
    check_python_string_methods_and_loop_helpers
);

fn check_raise_exception_is_a_typed_error() {
    let src = "{% for m in messages %}{% if m.role not in ['user', 'assistant'] %}\
{{ raise_exception('Unsupported role: ' + m.role) }}{% endif %}{{ m.content }}{% endfor %}";
    let t = ChatTemplate::new(src, "", "").unwrap();
    assert_eq!(t.render(&user("ok"), false).unwrap(), "ok");
    let err = t
        .render(&[ChatMessage::new("tool", "x")], false)
        .unwrap_err();
    assert_eq!(err, TemplateError::Raised("Unsupported role: tool".into()));
}
cross_test!(
    raise_exception_is_a_typed_error,
    check_raise_exception_is_a_typed_error
);

fn check_broken_templates_are_errors_not_panics() {
    assert!(matches!(
        ChatTemplate::new("{% for m in messages %}", "", ""),
        Err(TemplateError::Syntax(_))
    ));
    assert!(matches!(
        ChatTemplate::new("{{ 1 + }}", "", ""),
        Err(TemplateError::Syntax(_))
    ));
    let t = ChatTemplate::new("{{ messages | no_such_filter }}", "", "")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        t.render(&user("x"), false),
        Err(TemplateError::Render(_))
    ));
    let t = ChatTemplate::new("{{ messages[5].content.strip() }}", "", "").unwrap();
    assert!(t.render(&user("x"), false).is_err());
}
cross_test!(
    broken_templates_are_errors_not_panics,
    check_broken_templates_are_errors_not_panics
);

fn check_messages_deserialize_from_json() {
    let msgs: Vec<ChatMessage> =
        serde_json::from_str(r#"[{"role":"user","content":"hi"}]"#).unwrap();
    assert_eq!(msgs, user("hi"));
}
cross_test!(
    messages_deserialize_from_json,
    check_messages_deserialize_from_json
);

/// Hostile templates end in a typed error, bounded in time and output, and leave the template
/// usable (issue 37): a macro calling itself twice per level for 40 levels (2^40 calls) and
/// loops nested 10⁴ × 10⁴ run out of their instruction budget; 10⁵ outputs of 10 MB stop at
/// the output limit after the first; unbounded recursion stops at the nesting limit.
fn check_hostile_templates_are_bounded() {
    let budget = |src: &str| {
        let t = ChatTemplate::new(src, "", "").unwrap_or_else(|e| panic!("{e}"));
        let start = std::time::Instant::now();
        let err = t.render(&user("x"), false).unwrap_err();
        let took = start.elapsed();
        assert!(took.as_secs() < 120, "{src}: {took:?}");
        err
    };
    // 2^40 calls: the nesting limit stops it (each macro call counts several levels).
    let exponential = "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}\
{% endmacro %}{{ f(40) }}";
    let e = budget(exponential);
    assert!(
        matches!(e, TemplateError::Budget { .. } | TemplateError::Render(_)),
        "exponential macro: {e}"
    );
    // 10^8 calls, 8 deep: the budget stops it.
    let wide = "{% macro f(n) %}{% for i in range(10) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}\
{% endfor %}{% endmacro %}{{ f(8) }}";
    let e = budget(wide);
    assert!(matches!(e, TemplateError::Budget { .. }), "wide macro: {e}");
    let nested = "{% for i in range(10000) %}{% for j in range(10000) %}{% endfor %}{% endfor %}";
    assert!(
        matches!(budget(nested), TemplateError::Budget { .. }),
        "nested loops"
    );
    let deep = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
    assert!(
        matches!(budget(deep), TemplateError::Render(_)),
        "unbounded recursion"
    );
    let t = ChatTemplate::new(
        "{% for i in range(100000) %}{{ 'x' * 10000000 }}{% endfor %}",
        "",
        "",
    )
    .unwrap();
    assert_eq!(
        t.render_limited(&user("x"), false, 1 << 20).unwrap_err(),
        TemplateError::TooLong { limit: 1 << 20 }
    );
    // Within its limit the same template family renders.
    let t = ChatTemplate::new("{{ 'ab' * 3 }}{{ messages[0].content }}", "", "").unwrap();
    assert_eq!(t.render_limited(&user("x"), false, 7).unwrap(), "abababx");
    assert_eq!(
        t.render_limited(&user("x"), false, 6).unwrap_err(),
        TemplateError::TooLong { limit: 6 }
    );
}
cross_test!(
    hostile_templates_are_bounded,
    check_hostile_templates_are_bounded
);

/// The budget leaves room for real conversations: 4,000 turns of 256 bytes (1 MB of prompt,
/// more than a 128k-token context holds) through ChatML, and through a template that gathers a
/// letter per turn into a namespace string (copied whole at every turn, as templates that
/// gather their system part do), both render.
fn check_long_conversations_fit_the_budget() {
    let content = "word ".repeat(51) + "w";
    let turns: Vec<ChatMessage> = (0..4000)
        .map(|i| ChatMessage::new(if i % 2 == 0 { "user" } else { "assistant" }, &content))
        .collect();
    let t = ChatTemplate::new(CHATML, "<s>", "</s>").unwrap();
    let out = t.render_limited(&turns, true, 4 << 20).unwrap();
    assert!(out.len() > 1_000_000, "{}", out.len());
    let gather = "{% set ns = namespace(all='') %}{% for m in messages %}{% if m.role == 'user' %}\
{% set ns.all = ns.all ~ m.content[0] %}{% endif %}{% endfor %}{{ ns.all|length }}";
    let t = ChatTemplate::new(gather, "<s>", "</s>").unwrap();
    assert_eq!(t.render(&turns, false).unwrap(), "2000");
}
cross_test!(
    long_conversations_fit_the_budget,
    check_long_conversations_fit_the_budget
);
