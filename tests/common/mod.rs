//! Shared test plumbing: one async test body that runs natively (lavapipe, via pollster) and in
//! the browser (wasm-bindgen-test in headless Chromium on SwiftShader), a sync sibling for tests
//! that need no GPU, and the default model's bytes on both targets.

#[cfg(target_arch = "wasm32")]
wasm_bindgen_test::wasm_bindgen_test_configure!(run_in_browser);

#[allow(dead_code)]
pub mod architectures;
#[allow(dead_code)]
pub mod constraints;
#[allow(dead_code)]
pub mod exact;
#[allow(dead_code)]
pub mod shift;

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

/// `native_test!(name, async_fn)`: `gpu_test!` for the native lane only. The native lane owns
/// the numerics (every format × architecture × strategy against the CPU and exact references);
/// the browser lane runs what only a browser can break (the wasm boundary, the WebGPU backend,
/// SwiftShader's limits, no shader-f16) on the smallest models that show it. Every use says
/// what covers its browser side.
#[macro_export]
macro_rules! native_test {
    ($name:ident, $body:path) => {
        #[cfg(not(target_arch = "wasm32"))]
        #[test]
        fn $name() {
            pollster::block_on($body())
        }
    };
}

/// A GPU context with `options`. In the browser every test of a binary runs in one page, one
/// after another, and gets a context on one device: a kernel one test compiled (the device's
/// pipeline cache) is not compiled again by the next, which on SwiftShader costs ~1–6 s a
/// kernel. Natively each test is a process of its own (nextest), with a device of its own.
#[allow(dead_code)]
pub async fn gpu_context(options: fuselm::gpu::ContextOptions) -> fuselm::gpu::GpuContext {
    #[cfg(target_arch = "wasm32")]
    {
        use fuselm::gpu::GpuContext;
        thread_local! {
            static ROOT: std::cell::RefCell<Option<GpuContext>> = const { std::cell::RefCell::new(None) };
        }
        let sibling = ROOT.with(|r| r.borrow().as_ref().map(|root| root.sibling(options)));
        if let Some(ctx) = sibling {
            return ctx.expect("a context on the binary's device");
        }
        let root = GpuContext::new().await.expect("a GPU context");
        let ctx = root
            .sibling(options)
            .expect("a context on the binary's device");
        ROOT.with(|r| *r.borrow_mut() = Some(root));
        ctx
    }
    #[cfg(not(target_arch = "wasm32"))]
    fuselm::gpu::GpuContext::with_options(options)
        .await
        .expect("a GPU context")
}

/// The default model (SmolLM2-135M-Instruct Q4_1), fetched and verified by `scripts/fetch-model`
/// when it is not there yet. Native only: `default_model_bytes` serves both targets.
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

/// `cross_test!(name, fn)` is `gpu_test!`'s sibling for a synchronous body: a native `#[test]`
/// and a `#[wasm_bindgen_test]` that both call `fn()`. `cross_test!(async name, fn)` is
/// `gpu_test!` itself, for an async body that needs no GPU (e.g. one that loads the model).
#[macro_export]
macro_rules! cross_test {
    (async $name:ident, $body:path) => {
        $crate::gpu_test!($name, $body);
    };
    ($name:ident, $body:path) => {
        #[cfg(not(target_arch = "wasm32"))]
        #[test]
        fn $name() {
            $body()
        }
        #[cfg(target_arch = "wasm32")]
        #[wasm_bindgen_test::wasm_bindgen_test]
        fn $name() {
            $body()
        }
    };
}

/// The bytes of the default model, on both targets. Natively they are read from
/// `default_model()`. In the browser they are fetched over HTTP from the server named at compile
/// time by `FUSELM_TEST_ASSETS` (`scripts/serve.mjs`, which serves the repository root); without
/// it the test fails rather than skips, so a browser run never silently loses coverage.
#[allow(dead_code)]
pub async fn default_model_bytes() -> Vec<u8> {
    #[cfg(not(target_arch = "wasm32"))]
    {
        let path = default_model();
        std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    }
    #[cfg(target_arch = "wasm32")]
    {
        fetch_asset("/models/SmolLM2-135M-Instruct.Q4_1.gguf").await
    }
}

/// GETs `path` from `FUSELM_TEST_ASSETS` (e.g. `http://127.0.0.1:8787`), whole.
#[cfg(target_arch = "wasm32")]
#[allow(dead_code)]
pub async fn fetch_asset(path: &str) -> Vec<u8> {
    use wasm_bindgen::JsCast;
    use wasm_bindgen_futures::JsFuture;

    let Some(base) = option_env!("FUSELM_TEST_ASSETS") else {
        panic!(
            "FUSELM_TEST_ASSETS is not set at compile time, so the browser test cannot fetch {path}. \
             Run `scripts/fetch-model`, `node scripts/serve.mjs 8787 &`, then \
             `FUSELM_TEST_ASSETS=http://127.0.0.1:8787 cargo test --target wasm32-unknown-unknown` \
             (scripts/test does all of this)"
        )
    };
    let url = format!("{}{path}", base.trim_end_matches('/'));
    let fail = |what: &str, e: wasm_bindgen::JsValue| -> ! {
        panic!(
            "{what} {url} (is `node scripts/serve.mjs` serving FUSELM_TEST_ASSETS={base}?): {e:?}"
        )
    };
    let window = web_sys::window().expect("a browser window (run_in_browser)");
    let response: web_sys::Response = JsFuture::from(window.fetch_with_str(&url))
        .await
        .unwrap_or_else(|e| fail("fetch", e))
        .unchecked_into();
    assert!(
        response.ok(),
        "GET {url}: HTTP {} (run scripts/fetch-model?)",
        response.status()
    );
    let buffer = JsFuture::from(response.array_buffer().unwrap_or_else(|e| fail("read", e)))
        .await
        .unwrap_or_else(|e| fail("read", e));
    js_sys::Uint8Array::new(&buffer).to_vec()
}
