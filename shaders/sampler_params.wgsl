// The sampler's settings (mirrors `sampling::SamplerParams` field for field), the penalty
// formula and the counter-based RNG, shared by head_logits.wgsl, sample_select.wgsl and
// sample_choose.wgsl. The CPU reference (`sampling::reference`) performs the same f32
// operations in the same order, so CPU and GPU choose the same tokens.

struct Sampler {
    inv_temperature: f32, // 0: greedy
    top_k: u32,           // 1..=MAX_CANDIDATES
    top_p: f32,
    min_p: f32,
    repeat: f32,
    inv_repeat: f32,
    frequency: f32,
    presence: f32,
    penalty_last_n: u32,
    penalties_on: u32,
    seed_lo: u32,
    seed_hi: u32,
    n_stop: u32,
    constrained: u32, // 1: counts' MASKED_BIT marks the ids the constraint disallows
    _pad1: u32,
    _pad2: u32,
    stop_ids: array<u32, 16>,
}

const MAX_CANDIDATES: u32 = 128u; // sampling::MAX_CANDIDATES
const NONE: u32 = 0xffffffffu;
const SENTINEL_Z: f32 = -3.40282e38; // z of an empty candidate slot (q = 0: never drawn)

// A compiled constraint's table (`kernels::constraint` has the layout): the header words that
// hold its sections' offsets (constraint_mask.wgsl, sample_choose.wgsl, the megakernel).
const T_CLASSES: u32 = 4u;
const T_TRANS: u32 = 5u;
const T_MASK_OF_STATE: u32 = 6u;
const T_MASKS: u32 = 7u;
const T_TOKEN_STARTS: u32 = 8u;
const T_TOKEN_BYTES: u32 = 9u;

// `counts[id]`'s top bit: the constraint disallows id at this step (constraint_mask.wgsl).
const MASKED_BIT: u32 = 0x80000000u;
// The logit of a disallowed id: f32's lowest, so it is never the best and its q is 0
// (`sampling::MASKED_LOGIT`).
const MASKED_LOGIT: f32 = -0x1.fffffep+127f; // -f32::MAX, exactly

// llama.cpp's repetition / frequency / presence penalties for an id seen `count` times in the
// window (multiplying by the host-computed reciprocal instead of dividing); a disallowed id
// (constrained generation) gets MASKED_LOGIT.
fn penalize(l: f32, count: u32, s: Sampler) -> f32 {
    if s.constrained != 0u && (count & MASKED_BIT) != 0u {
        return MASKED_LOGIT;
    }
    let c = count & ~MASKED_BIT;
    if s.penalties_on == 0u || c == 0u {
        return l;
    }
    let r = select(l * s.repeat, l * s.inv_repeat, l > 0.0);
    return r - (f32(c) * s.frequency + s.presence);
}

fn pcg(v: u32) -> u32 {
    let st = v * 747796405u + 2891336453u;
    let w = ((st >> ((st >> 28u) + 4u)) ^ st) * 277803737u;
    return (w >> 22u) ^ w;
}

// Uniform in [0, 1) for the token at sequence position `position`.
fn uniform01(seed_lo: u32, seed_hi: u32, position: u32) -> f32 {
    return f32(pcg(position ^ pcg(seed_lo ^ pcg(seed_hi))) >> 8u) * (1.0 / 16777216.0);
}

// A step whose logits are not all finite chooses NONFINITE (`sampling::NONFINITE_ID`): commit
// writes it as the token and ends the generation, and the host reports a `numerical` error.
// In the reductions of the best logit a non-finite logit enters as (NONFINITE_Z, NONFINITE),
// which wins against every finite logit but f32::MAX itself.
const NONFINITE: u32 = 0xfffffffeu;
const NONFINITE_Z: f32 = 0x1.fffffep+127f; // f32::MAX

// Whether v is NaN or ±infinity, read from its bits (a comparison such as v != v may be folded
// away by a compiler that assumes finite arithmetic).
fn non_finite(v: f32) -> bool {
    return (bitcast<u32>(v) & 0x7f800000u) == 0x7f800000u;
}

// Candidate order: larger z first, then lower id. NaN never compares better.
fn better(az: f32, aid: u32, bz: f32, bid: u32) -> bool {
    return az > bz || (az == bz && aid < bid);
}
