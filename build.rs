//! Records the git commit of a native release build (`FUSELM_GIT_COMMIT`), which `fuselm bench`
//! and `fuselm sim-bench` write into their JSON (`FUSELM_COMMIT` at run time overrides it). Dev
//! and test builds and the wasm package never run git, so a commit does not rebuild them; with no
//! git (a source tarball) nothing is set and the JSON says "unknown".
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let release = std::env::var("PROFILE").is_ok_and(|p| p == "release");
    let wasm = std::env::var("CARGO_CFG_TARGET_ARCH").is_ok_and(|a| a == "wasm32");
    if !release || wasm {
        return;
    }
    let Some(commit) = git(&["rev-parse", "--short", "HEAD"]) else {
        return;
    };
    println!("cargo:rustc-env=FUSELM_GIT_COMMIT={commit}");
    // Run again when HEAD moves: HEAD itself, the branch it names, packed refs (only files that
    // exist: a missing one would rerun this on every build).
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    for name in ["HEAD", "packed-refs"].into_iter().chain(branch.as_deref()) {
        if let Some(path) = git(&["rev-parse", "--git-path", name]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
}
