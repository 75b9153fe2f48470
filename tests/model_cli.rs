//! `fuselm inspect` and `fuselm tokenize` on the real default model, and `fuselm generate` (its
//! rules, sessions, `--calibrate`) on synthetic ones, as a user runs them.
#![cfg(not(target_arch = "wasm32"))]

mod common;

use std::process::Command;

fn fuselm(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fuselm"))
        .args(args)
        .output()
        .expect("run fuselm")
}

/// A fresh temporary directory `fuselm-cli-NAME-PID` holding `fuselm synthetic-model`'s file:
/// the directory (the caller removes it) and the model's path.
fn synthetic_model_in(name: &str) -> (std::path::PathBuf, String) {
    let dir = std::env::temp_dir().join(format!("fuselm-cli-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let model = dir.join("synthetic.gguf").to_str().unwrap().to_string();
    let out = fuselm(&["synthetic-model", &model]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (dir, model)
}

/// `fuselm generate --json` of `prompt` on `model` with `extra` flags: its JSON and stderr.
fn generate_json(
    model: &str,
    prompt: &str,
    max_tokens: &str,
    extra: &[&str],
) -> (serde_json::Value, String) {
    let mut args = vec![
        "generate",
        "--model",
        model,
        "--prompt",
        prompt,
        "--max-tokens",
        max_tokens,
        "--json",
    ];
    args.extend_from_slice(extra);
    let out = fuselm(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    (json, stderr)
}

#[test]
fn tokenize_matches_llama_cpp_and_decodes_back() {
    let model = common::default_model();
    let model = model.to_str().expect("utf-8 path");
    let out = fuselm(&[
        "tokenize",
        "--model",
        model,
        "--json",
        "Hello, world! How are you today?",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(
        v["ids"],
        serde_json::json!([19556, 28, 905, 17, 1073, 359, 346, 1834, 47])
    );
    let out = fuselm(&["tokenize", "--model", model, "--decode", "19556, 28, 905"]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim_end(),
        "Hello, world"
    );
}

#[test]
fn inspect_describes_smollm2() {
    let model = common::default_model();
    let out = fuselm(&["inspect", "--json", model.to_str().expect("utf-8 path")]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let c = &v["config"]["Ok"];
    assert_eq!(c["n_layers"], 30);
    assert_eq!(c["n_embd"], 576);
    assert_eq!(
        (c["n_head"].clone(), c["n_head_kv"].clone()),
        (9.into(), 3.into())
    );
    assert_eq!(c["tied_output"], true);
    assert_eq!(v["tensors"].as_array().map(Vec::len), Some(272));
    assert_eq!(v["tokenizer"]["Ok"]["merges"], 48900);
}

#[test]
fn a_truncated_model_is_a_clear_error() {
    let model = std::fs::read(common::default_model()).expect("model");
    let dir = std::env::temp_dir().join(format!("fuselm-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let cut = dir.join("truncated.gguf");
    std::fs::write(&cut, &model[..100_000]).expect("write");
    let out = fuselm(&["inspect", cut.to_str().expect("utf-8 path")]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.starts_with("fuselm: "), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Flags that cannot mean anything are refused before the model is read (issue 37):
/// `--system` without `--chat`, and `--n-ctx 0` says so rather than running with 1.
#[test]
fn meaningless_generate_flags_are_errors() {
    let model = common::default_model();
    let model = model.to_str().expect("utf-8 path");
    let out = fuselm(&[
        "generate", "--model", model, "--prompt", "hi", "--system", "s",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--chat"), "{stderr}");
    let out = fuselm(&[
        "generate", "--model", model, "--prompt", "hi", "--n-ctx", "0",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("nCtx must be at least 1, got 0"),
        "{stderr}"
    );
}

/// Only a regular file is read as a model (`/dev/zero` used to be read until memory ran out),
/// `--n-ctx` past the trained context warns, and the default `--max-tokens` fits the context:
/// a 7-token prompt in an 8-token context generates one token instead of failing. On the
/// synthetic model (byte-level vocabulary, 512 trained positions): these are the CLI's rules,
/// the same for every model, and its runs of the real one took 99 s of CI's lane (2026-11-29).
#[test]
fn generate_reads_regular_files_and_fits_the_context() {
    for path in ["/dev/zero", "/"] {
        let out = fuselm(&["generate", "--model", path, "--prompt", "hi"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("a model must be a GGUF file"), "{stderr}");
    }
    let (dir, model) = synthetic_model_in("fits");
    let model = model.as_str();
    // Seven bytes: seven prompt tokens.
    let prompt = "hello!!";
    let out = fuselm(&[
        "generate",
        "--model",
        model,
        "--prompt",
        prompt,
        "--n-ctx",
        "8",
        "--no-context-shift",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("[7 prompt tokens, 1 generated"), "{stderr}");
    assert!(stderr.contains("[GPU memory "), "{stderr}");
    // A budget below the estimate refuses the model from its header.
    let out = fuselm(&[
        "generate",
        "--model",
        model,
        "--prompt",
        "hi",
        "--memory-budget",
        "1000000",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("memoryBudget exceeded") && stderr.contains("weights 0.5 MiB"),
        "{stderr}"
    );
    // With the context shift (the default) it goes on past nCtx: at 8 tokens half of the 7
    // after the first are dropped.
    let (json, stderr) = generate_json(model, prompt, "3", &["--n-ctx", "8"]);
    assert_eq!(
        json["generatedIds"].as_array().map(Vec::len),
        Some(3),
        "{stderr}"
    );
    assert_eq!(json["droppedTokens"], 3, "{stderr}");
    let out = fuselm(&[
        "generate",
        "--model",
        model,
        "--prompt",
        "hi",
        "--n-ctx",
        "600",
        "--max-tokens",
        "1",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("--n-ctx 600 is beyond the 512 tokens"),
        "{stderr}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn generate_calibrates_and_keeps_the_ids() {
    let (dir, model) = synthetic_model_in("calibrate");
    let model = model.as_str();
    let generate = |extra: &[&str]| {
        let (json, stderr) = generate_json(model, "Hello", "8", extra);
        (json["generatedIds"].clone(), stderr)
    };
    let (planned, _) = generate(&[]);
    let (calibrated, stderr) = generate(&["--calibrate"]);
    let line = stderr
        .lines()
        .find_map(|l| {
            l.strip_prefix("[calibration ")
                .and_then(|l| l.strip_suffix(']'))
        })
        .unwrap_or_else(|| panic!("no calibration line: {stderr}"));
    let c: serde_json::Value = serde_json::from_str(line).expect("calibration json");
    let best = c["strategy"].as_str().expect("strategy");
    assert_eq!(c["results"][0]["strategy"], best, "{c}");
    assert_eq!(c["results"].as_array().map(Vec::len), Some(3), "{c}");
    assert!(
        stderr.contains(&format!(
            "[strategy {best}: fastest in this device's calibration"
        )),
        "{stderr}"
    );
    assert_eq!(
        calibrated, planned,
        "greedy ids do not depend on the strategy"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn generate_saves_and_restores_a_session() {
    let dir = std::env::temp_dir().join(format!("fuselm-cli-session-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_owned();
    let (model, session) = (path("synthetic.gguf"), path("turn.session"));
    assert!(fuselm(&["synthetic-model", &model]).status.success());
    let generate = |prompt: &str, extra: &[&str]| generate_json(&model, prompt, "6", extra);
    // The synthetic vocabulary spells text byte by byte: the next prompt starts with this one
    // (its rows, prefilled, are what the session restores; the answer's rows are not reused).
    let (_, stderr) = generate("A saved turn: ", &["--save-session", &session]);
    assert!(stderr.contains("saved to"), "{stderr}");
    let next = "A saved turn: and more";
    let (fresh, _) = generate(next, &[]);
    let (resumed, stderr) = generate(next, &["--load-session", &session]);
    assert!(stderr.contains("tokens restored from"), "{stderr}");
    assert_eq!(fresh["reusedPromptTokens"], 0);
    assert!(
        resumed["reusedPromptTokens"].as_u64().unwrap() >= 14,
        "{resumed}"
    );
    assert_eq!(resumed["generatedIds"], fresh["generatedIds"]);
    // Another model's session is refused, naming why.
    let other = path("other.gguf");
    assert!(fuselm(&["synthetic-model", &other, "--seed", "3"])
        .status
        .success());
    let out = fuselm(&[
        "generate",
        "--model",
        &other,
        "--prompt",
        "x",
        "--load-session",
        &session,
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("saved with another model"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
