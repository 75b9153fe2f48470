// KV cache element type: f16, half the memory and bandwidth of f32. Needs the shader-f16
// feature (`enable` must precede every other declaration, hence this is prepended first);
// kernels pick it only when the device has SHADER_F16. Values are rounded to f16 on store and
// all arithmetic stays f32.
enable f16;
alias kv_t = f16;
