//! How the fused layer kernels find their layer ([`LayerIndexing`]): one bind group per kernel
//! role serves every layer whose weights (and KV caches) are stacked, so a step records only
//! `setPipeline` + `dispatchWorkgroups` per layer kernel. The WGSL each kernel gets for it
//! ([`layer_prelude`]), its bind group index ([`in_group`]), its grid ([`layer_grid`]) and its
//! weight bindings ([`weight_res`]).

use super::binding::Res;
use super::dispatch::{check_dim, max_groups};
use super::weights::{GpuWeight, WeightFormat};
use crate::error::{FuselmError, Result};
use crate::gpu::GpuContext;

/// How the layer kernels find their layer. Each of them is dispatched once per layer with one
/// bind group per pass for all layers where it can be (fewer WebGPU calls: in a browser each
/// one costs the host microseconds): the layer is the number of extra workgroups in the grid's
/// x dimension (`layer = num_workgroups.x - X_BASE`; those extra workgroups return at once),
/// its vectors' offsets and RoPE/window settings come from a per-layer uniform array, and
/// where a weight (or the KV cache) stacks every layer in one buffer its rows start at
/// `layer * stride`. Stride 0: that binding is one layer's buffer, bound per layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LayerIndexing {
    pub n_layer: u32,
    /// Rows per layer of each weight binding of the kernel, in binding order (0: per layer).
    pub weight_strides: [u32; 3],
    /// KV cache vec4s per layer in the stacked caches (attention; 0: per layer).
    pub kv_stride: u32,
}

impl LayerIndexing {
    /// Whether one bind group serves every layer.
    pub fn shared(&self, weights: usize, kv: bool) -> bool {
        self.weight_strides[..weights].iter().all(|&s| s > 0) && (!kv || self.kv_stride > 0)
    }
}

/// The WGSL that makes a layer kernel layer-indexed ([`LayerIndexing`]): `N_LAYER`, `X_BASE`,
/// `enter_layer(num_workgroups.x)` (returns the layer; sets the rows' offsets, `kv_base` and,
/// with `params`, the private `p = lp[layer]` for helper functions), and for each weight
/// `(name, format)` the decoder reading binding `name` with `name_fetch/_decode/_dot8/_load8`
/// wrappers that add this layer's row offset.
pub(super) fn layer_prelude(
    ix: &LayerIndexing,
    x_base: u32,
    weights: &[(&str, WeightFormat)],
    params: bool,
) -> String {
    let mut out = format!(
        "const N_LAYER: u32 = {}u;\nconst X_BASE: u32 = {x_base}u;\nvar<private> kv_base: u32;\n",
        ix.n_layer
    );
    let mut enter = format!(
        "    let layer = nwg_x - X_BASE;\n    kv_base = layer * {}u;\n",
        ix.kv_stride
    );
    if params {
        enter.push_str("    p = lp[layer];\n");
    }
    for (i, (name, format)) in weights.iter().enumerate() {
        let stride = ix.weight_strides[i];
        out.push_str(&format!("var<private> row_{name}: u32;\n"));
        enter.push_str(&format!("    row_{name} = layer * {stride}u;\n"));
        out.push_str(&format.decoder_reading(name, &format!("{name}_at")));
        out.push_str(&format!(
            "
fn {name}_fetch(row: u32, u: u32, k: u32) -> vec4<u32> {{
    return {name}_at_fetch(row + row_{name}, u, k);
}}
fn {name}_decode(raw: vec4<u32>, row: u32, u: u32, k: u32) -> W8 {{
    return {name}_at_decode(raw, row + row_{name}, u, k);
}}
fn {name}_dot8(raw: vec4<u32>, row: u32, u: u32, k: u32, x: W8, xs: f32) -> f32 {{
    return {name}_at_dot8(raw, row + row_{name}, u, k, x, xs);
}}
fn {name}_load8(row: u32, u: u32, k: u32) -> W8 {{
    return {name}_at_load8(row + row_{name}, u, k);
}}
"
        ));
    }
    out.push_str(&format!(
        "fn enter_layer(nwg_x: u32) -> u32 {{\n{enter}    return layer;\n}}\n"
    ));
    out
}

/// A layer kernel's source with its bindings moved to `@group(group)`.
pub(super) fn in_group(source: String, group: u32) -> String {
    source.replace("@group(0)", &format!("@group({group})"))
}

/// The grid of a layer kernel: `x_base` workgroups + `layer` in x.
pub(super) fn layer_grid(
    ctx: &GpuContext,
    what: &'static str,
    x_base: u32,
    n_layer: u32,
) -> Result<u32> {
    let needed = u64::from(x_base) + u64::from(n_layer.max(1)) - 1;
    check_dim(needed, max_groups(ctx)).map_err(|_| FuselmError::LimitExceeded {
        limit: what,
        needed,
        available: u64::from(max_groups(ctx)),
    })?;
    Ok(x_base)
}

/// One layer weight as a binding: its own buffer (or slice), or, when the layer kernel binds
/// every layer at once, the whole stacked buffer.
pub(super) fn weight_res<'a>(ctx: &GpuContext, w: &'a GpuWeight, stacked: bool) -> Result<Res<'a>> {
    match w.chunks() {
        [c] if stacked => Ok((&c.view.buffer).into()),
        [c] => Ok(c.binding()),
        _ => Err(FuselmError::LimitExceeded {
            limit: "maxStorageBufferBindingSize (the fused strategy binds each layer weight whole)",
            needed: w.format.gpu_row_bytes(u64::from(w.k)) * u64::from(w.n),
            available: ctx.device.limits().max_storage_buffer_binding_size,
        }),
    }
}

/// A uniform buffer holding `params` (one per layer).
pub fn uniform_array<P: bytemuck::Pod>(
    ctx: &GpuContext,
    label: &str,
    params: &[P],
) -> wgpu::Buffer {
    ctx.create_buffer_init(&wgpu::util::BufferInitDescriptor {
        label: Some(label),
        contents: bytemuck::cast_slice(params),
        usage: wgpu::BufferUsages::UNIFORM,
    })
}
