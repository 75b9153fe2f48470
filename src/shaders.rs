//! The one place that names WGSL sources. Each kernel role has its own file under `shaders/`.

pub const BENCH_CHAIN: &str = include_str!("../shaders/bench_chain.wgsl");
pub const BENCH_READ: &str = include_str!("../shaders/bench_read.wgsl");
pub const BENCH_FILL: &str = include_str!("../shaders/bench_fill.wgsl");
pub const COMMON: &str = include_str!("../shaders/common.wgsl");
pub const WEIGHTS_F32: &str = include_str!("../shaders/weights_f32.wgsl");
pub const WEIGHTS_F16: &str = concat!(
    include_str!("../shaders/weights_f16.wgsl"),
    include_str!("../shaders/weights_half.wgsl")
);
pub const WEIGHTS_Q8_0: &str = include_str!("../shaders/weights_q8_0.wgsl");
pub const WEIGHTS_Q4_0: &str = include_str!("../shaders/weights_q4_0.wgsl");
pub const WEIGHTS_Q4_1: &str = include_str!("../shaders/weights_q4_1.wgsl");
pub const WEIGHTS_Q5_0: &str = include_str!("../shaders/weights_q5_0.wgsl");
pub const WEIGHTS_Q5_1: &str = include_str!("../shaders/weights_q5_1.wgsl");
pub const WEIGHTS_Q2_K: &str = include_str!("../shaders/weights_q2_k.wgsl");
pub const WEIGHTS_Q3_K: &str = include_str!("../shaders/weights_q3_k.wgsl");
pub const WEIGHTS_Q5_K: &str = include_str!("../shaders/weights_q5_k.wgsl");
pub const WEIGHTS_Q4_K: &str = include_str!("../shaders/weights_q4_k.wgsl");
pub const WEIGHTS_Q6_K: &str = include_str!("../shaders/weights_q6_k.wgsl");
pub const WEIGHTS_BF16: &str = concat!(
    include_str!("../shaders/weights_bf16.wgsl"),
    include_str!("../shaders/weights_half.wgsl")
);
pub const EMBED: &str = include_str!("../shaders/embed.wgsl");
pub const RMS_NORM: &str = include_str!("../shaders/rms_norm.wgsl");
pub const MATVEC: &str = include_str!("../shaders/matvec.wgsl");
/// Composed before each of the three prefill matrix tiles below.
pub const MATMUL_IO: &str = include_str!("../shaders/matmul_io.wgsl");
pub const MATMUL: &str = include_str!("../shaders/matmul.wgsl");
pub const MATMUL_WIDE: &str = include_str!("../shaders/matmul_wide.wgsl");
/// Composed after `enable f16; enable wgpu_cooperative_matrix;` (kernels::matmul).
pub const MATMUL_COOP: &str = include_str!("../shaders/matmul_coop.wgsl");
pub const ROPE: &str = include_str!("../shaders/rope.wgsl");
pub const ROPE_MATH: &str = include_str!("../shaders/rope_math.wgsl");
pub const REDUCE_SHARED: &str = include_str!("../shaders/reduce_shared.wgsl");
pub const REDUCE_SUBGROUP: &str = include_str!("../shaders/reduce_subgroup.wgsl");
pub const FUSED_QKV: &str = include_str!("../shaders/fused_qkv.wgsl");
/// A template: `{W}` is a weight binding of fused_qkv (see `FusedQkv::new`).
pub const FUSED_QKV_REGION: &str = include_str!("../shaders/fused_qkv_region.wgsl");
pub const FUSED_ATTENTION: &str = include_str!("../shaders/fused_attention.wgsl");
pub const FUSED_FFN_UP: &str = include_str!("../shaders/fused_ffn_up.wgsl");
pub const FUSED_FFN_DOWN: &str = include_str!("../shaders/fused_ffn_down.wgsl");
pub const FUSED_O_PROJ: &str = include_str!("../shaders/fused_o_proj.wgsl");
pub const FUSED_POST_NORM: &str = include_str!("../shaders/fused_post_norm.wgsl");
pub const HEAD_LOGITS: &str = include_str!("../shaders/head_logits.wgsl");
pub const SAMPLE_TOPK: &str = include_str!("../shaders/sample_topk.wgsl");
pub const SAMPLE_SELECT: &str = include_str!("../shaders/sample_select.wgsl");
pub const SAMPLE_DRAW: &str = include_str!("../shaders/sample_draw.wgsl");
pub const MEGAKERNEL: &str = include_str!("../shaders/megakernel.wgsl");
pub const MEGAKERNEL_GRID: &str = include_str!("../shaders/megakernel_grid.wgsl");
pub const MEGAKERNEL_REDUCE_SHARED: &str = include_str!("../shaders/megakernel_reduce_shared.wgsl");
pub const MEGAKERNEL_REDUCE_SUBGROUP: &str =
    include_str!("../shaders/megakernel_reduce_subgroup.wgsl");
pub const SAMPLE_CHOOSE: &str = include_str!("../shaders/sample_choose.wgsl");
pub const CONSTRAINT_MASK: &str = include_str!("../shaders/constraint_mask.wgsl");
pub const SAMPLER_PARAMS: &str = include_str!("../shaders/sampler_params.wgsl");
pub const KV_STORE: &str = include_str!("../shaders/kv_store.wgsl");
pub const KV_SHIFT: &str = include_str!("../shaders/kv_shift.wgsl");
pub const ATTENTION: &str = include_str!("../shaders/attention.wgsl");
pub const ATTENTION_TILED: &str = include_str!("../shaders/attention_tiled.wgsl");
pub const SWIGLU: &str = include_str!("../shaders/swiglu.wgsl");
pub const ADD: &str = include_str!("../shaders/add.wgsl");
pub const ARGMAX: &str = include_str!("../shaders/argmax.wgsl");
pub const ADVANCE: &str = include_str!("../shaders/advance.wgsl");
pub const KV_F32: &str = include_str!("../shaders/kv_f32.wgsl");
pub const KV_F16: &str = include_str!("../shaders/kv_f16.wgsl");
pub const SIM_COMMON: &str = include_str!("../shaders/sim_common.wgsl");
pub const SIM_POLICY: &str = include_str!("../shaders/sim_policy.wgsl");
pub const SIM_ROLLOUT: &str = include_str!("../shaders/sim_rollout.wgsl");
pub const SIM_STEP: &str = include_str!("../shaders/sim_step.wgsl");
pub const SIM_ENV_CARTPOLE: &str = include_str!("../shaders/sim_env_cartpole.wgsl");
pub const SIM_ENV_ACROBOT: &str = include_str!("../shaders/sim_env_acrobot.wgsl");
pub const SIM_ENV_MOUNTAIN_CAR: &str = include_str!("../shaders/sim_env_mountain_car.wgsl");
pub const SIM_ENV_PENDULUM: &str = include_str!("../shaders/sim_env_pendulum.wgsl");
pub const SIM_ENV_RASTRIGIN: &str = include_str!("../shaders/sim_env_rastrigin.wgsl");
pub const SIM_ES: &str = include_str!("../shaders/sim_es.wgsl");
pub const LOGPROB_SLICES: &str = include_str!("../shaders/logprob_slices.wgsl");
pub const LOGPROB_CHOOSE: &str = include_str!("../shaders/logprob_choose.wgsl");
