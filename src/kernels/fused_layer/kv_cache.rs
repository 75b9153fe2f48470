//! A layer's KV cache as a binding of a fused kernel.

use crate::kernels::binding::{BufferView, Res};

/// A layer's KV cache as a binding: the whole stacked buffer when one bind group serves every
/// layer (the kernel adds `kv_base`), else the layer's view.
pub(super) fn cache_res(v: &BufferView, stacked: bool) -> Res<'_> {
    if stacked {
        (&v.buffer).into()
    } else {
        v.into()
    }
}
