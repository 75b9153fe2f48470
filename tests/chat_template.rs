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
