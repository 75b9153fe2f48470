//! The wall clock in a browser: `performance.now()` from a window, a worker or Node's global
//! (`crate::clock::now_seconds` on wasm32), in seconds.

pub fn now_seconds() -> f64 {
    use wasm_bindgen::JsCast;
    let global = js_sys::global();
    let perf = if let Some(window) = global.dyn_ref::<web_sys::Window>() {
        window.performance()
    } else if let Some(worker) = global.dyn_ref::<web_sys::WorkerGlobalScope>() {
        worker.performance()
    } else {
        None
    };
    if let Some(p) = perf {
        return p.now() / 1000.0;
    }
    // Neither a window nor a worker (Node): its global `performance`, if any.
    let now = js_sys::Reflect::get(&global, &"performance".into())
        .ok()
        .filter(|p| p.is_object())
        .and_then(|p| {
            let f = js_sys::Reflect::get(&p, &"now".into()).ok()?;
            f.dyn_into::<js_sys::Function>()
                .ok()?
                .call0(&p)
                .ok()?
                .as_f64()
        });
    match now {
        Some(ms) => ms / 1000.0,
        // Date.now() is coarse (1 ms) but always exists.
        None => js_sys::Date::now() / 1000.0,
    }
}
