//! The one place that names WGSL sources. Each kernel role has its own file under `shaders/`.

pub const BENCH_CHAIN: &str = include_str!("../shaders/bench_chain.wgsl");
pub const BENCH_READ: &str = include_str!("../shaders/bench_read.wgsl");
pub const BENCH_FILL: &str = include_str!("../shaders/bench_fill.wgsl");
