//! Shared test plumbing: one async test body that runs natively (lavapipe, via pollster) and in
//! the browser (wasm-bindgen-test in headless Chromium on SwiftShader).

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

/// `gpu_test!(name, async_fn)` declares a native `#[test]` and a `#[wasm_bindgen_test]` that both
/// await `async_fn()`.
#[macro_export]
macro_rules! gpu_test {
    ($name:ident, $body:path) => {
        #[cfg(not(target_arch = "wasm32"))]
        #[test]
        fn $name() {
            pollster::block_on($body())
        }
        #[cfg(target_arch = "wasm32")]
        #[wasm_bindgen_test::wasm_bindgen_test]
        async fn $name() {
            $body().await
        }
    };
}

/// The default model (SmolLM2-135M-Instruct Q4_1), fetched and verified by `scripts/fetch-model`
/// when it is not there yet. Native only: the browser tests use synthetic models.
#[cfg(not(target_arch = "wasm32"))]
#[allow(dead_code)]
pub fn default_model() -> std::path::PathBuf {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let path = root.join("models/SmolLM2-135M-Instruct.Q4_1.gguf");
    if !path.exists() {
        let status = std::process::Command::new(root.join("scripts/fetch-model"))
            .status()
            .expect("run scripts/fetch-model");
        assert!(status.success(), "scripts/fetch-model failed");
    }
    path
}
