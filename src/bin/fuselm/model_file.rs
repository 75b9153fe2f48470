//! Opening a model file: only a regular file is read (a device such as /dev/zero, a FIFO or a
//! directory is refused before any byte is read), and `generate` streams it through the
//! library's `ModelLoader` so that the header, tokenizer and chat template are checked before
//! any weight is uploaded and no copy of the whole file is held.

use fuselm::gguf::Gguf;
use fuselm::gpu::GpuContext;
use fuselm::model::{LoadOptions, MemoryBudget, ModelLoader, TextModel};
use std::error::Error;
use std::fs::File;
use std::io::Read;
use std::path::Path;

/// Bytes per read while streaming a model to the GPU.
const READ_CHUNK: usize = 8 << 20;

/// `path` opened, with its length; refused unless it is a regular file.
pub fn open_regular(path: &Path) -> Result<(File, u64), Box<dyn Error>> {
    let shown = path.display();
    let meta = std::fs::metadata(path).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_file() {
        let what = if meta.is_dir() {
            "a directory"
        } else {
            "not a regular file (a device, FIFO or socket)"
        };
        return Err(format!("{shown}: {what}; a model must be a GGUF file").into());
    }
    let file = File::open(path).map_err(|e| format!("{shown}: {e}"))?;
    Ok((file, meta.len()))
}

/// The whole file (commands that inspect it), once it is known to be a regular file.
pub fn read_model(path: &Path) -> Result<(Vec<u8>, Gguf), Box<dyn Error>> {
    let (mut file, len) = open_regular(path)?;
    let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let gguf = Gguf::parse(&bytes)?;
    Ok((bytes, gguf))
}

/// Streams `path` to the GPU: a bad header, tokenizer or template fails after reading the
/// header only.
pub async fn load_streamed(
    path: &Path,
    ctx: GpuContext,
    options: LoadOptions,
    budget: Option<MemoryBudget>,
) -> Result<TextModel, Box<dyn Error>> {
    let (mut file, len) = open_regular(path)?;
    let mut loader = ModelLoader::new(ctx, options).with_memory_budget(budget);
    loader.expect_len(len);
    let mut chunk = vec![0u8; READ_CHUNK];
    loop {
        let n = file
            .read(&mut chunk)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        if n == 0 {
            break;
        }
        loader.push(&chunk[..n])?;
    }
    Ok(loader.finish().await?)
}
