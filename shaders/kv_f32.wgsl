// KV cache element type: f32 (every adapter). Prepended first to kv_store.wgsl and
// attention.wgsl, which declare the caches as array<kv_t> and convert through f32.
alias kv_t = f32;
