//! The one place that names WGSL sources. Each kernel role has its own file under `shaders/`.

pub const BENCH_CHAIN: &str = include_str!("../shaders/bench_chain.wgsl");
pub const BENCH_READ: &str = include_str!("../shaders/bench_read.wgsl");
pub const BENCH_FILL: &str = include_str!("../shaders/bench_fill.wgsl");
pub const COMMON: &str = include_str!("../shaders/common.wgsl");
pub const WEIGHTS_F32: &str = include_str!("../shaders/weights_f32.wgsl");
pub const WEIGHTS_F16: &str = include_str!("../shaders/weights_f16.wgsl");
pub const WEIGHTS_Q8_0: &str = include_str!("../shaders/weights_q8_0.wgsl");
pub const WEIGHTS_Q4_0: &str = include_str!("../shaders/weights_q4_0.wgsl");
pub const WEIGHTS_Q4_1: &str = include_str!("../shaders/weights_q4_1.wgsl");
pub const EMBED: &str = include_str!("../shaders/embed.wgsl");
pub const RMS_NORM: &str = include_str!("../shaders/rms_norm.wgsl");
pub const MATVEC: &str = include_str!("../shaders/matvec.wgsl");
pub const MATMUL: &str = include_str!("../shaders/matmul.wgsl");
pub const ROPE: &str = include_str!("../shaders/rope.wgsl");
pub const KV_STORE: &str = include_str!("../shaders/kv_store.wgsl");
pub const ATTENTION: &str = include_str!("../shaders/attention.wgsl");
pub const SWIGLU: &str = include_str!("../shaders/swiglu.wgsl");
pub const ADD: &str = include_str!("../shaders/add.wgsl");
pub const ARGMAX: &str = include_str!("../shaders/argmax.wgsl");
pub const ADVANCE: &str = include_str!("../shaders/advance.wgsl");
pub const KV_F32: &str = include_str!("../shaders/kv_f32.wgsl");
pub const KV_F16: &str = include_str!("../shaders/kv_f16.wgsl");
