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
