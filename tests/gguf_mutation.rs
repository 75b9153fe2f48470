//! Deterministic mutation testing of the GGUF reader (a fuzzing stand-in that runs in CI).
//!
//! Valid writer-built files get thousands of seeded mutations: byte flips, truncation at
//! every header offset, u64/u32 length fields inflated to huge values, splices. For each
//! input: no panic; no single allocation larger than a small multiple of the input (checked
//! with a counting global allocator); and a differential property: when `Gguf::parse`
//! accepts the bytes, `parse_header`, the stream reader (chunked) and dequantization agree.
//! It also replays every input in tests/fixtures/gguf/fuzz_regressions/ (crashes found by
//! `cargo fuzz`; the first byte picks the stream chunk size exactly as in the fuzz target).
//! This file holds a single test so the allocation counter sees only this work.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use fuselm::gguf::{
    dequantize_tensor, quantize_q4_0, GgmlType, Gguf, GgufStreamReader, GgufWriter,
    MetadataArray as A, MetadataValue as V, ModelConfig, StreamEvent,
};

struct Counting;
static LARGEST: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LARGEST.fetch_max(new, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let mut w = GgufWriter::new();
    w.add_str("general.architecture", "llama");
    for (k, v) in [
        ("llama.block_count", 1),
        ("llama.embedding_length", 32),
        ("llama.feed_forward_length", 32),
    ] {
        w.add_u32(k, v);
    }
    w.add_u32("llama.attention.head_count", 2);
    w.add_u32("llama.context_length", 64);
    w.add_f32("llama.attention.layer_norm_rms_epsilon", 1e-5);
    w.add_str_array("tokenizer.ggml.tokens", &["a", "b"]);
    w.add(
        "x.nested",
        V::Array(A::Array(vec![A::Bool(vec![true]), A::I16(vec![-3, 4])])),
    );
    w.add("x.f64", V::F64(0.5));
    let x: Vec<f32> = (0..1024).map(|i| (i as f32).cos()).collect();
    w.add_tensor_f32("token_embd.weight", &[32, 2], &x[..64]);
    w.add_tensor_f32("blk.0.attn_norm.weight", &[32], &x[..32]);
    for n in [
        "attn_q",
        "attn_k",
        "attn_v",
        "attn_output",
        "ffn_gate",
        "ffn_up",
        "ffn_down",
    ] {
        w.add_tensor(
            &format!("blk.0.{n}.weight"),
            &[32, 32],
            GgmlType::Q4_0,
            quantize_q4_0(&x),
        );
    }
    w.add_tensor_f32("blk.0.ffn_norm.weight", &[32], &x[..32]);
    w.add_tensor_f32("output_norm.weight", &[32], &x[..32]);
    w.add_tensor("q6k", &[256], GgmlType::Q6_K, vec![0x5a; 210]);
    w.add_tensor("q4k", &[256], GgmlType::Q4_K, vec![0xa5; 144]);
    w.add_tensor(
        "bf16",
        &[3],
        GgmlType::BF16,
        vec![0x80, 0x3f, 0, 0, 1, 0xff],
    );
    let model = w.to_bytes();
    let mut small = GgufWriter::new().version(2).alignment(8);
    small
        .add("b", V::Bool(false))
        .add("s", V::String("é".into()));
    small.add_tensor("t", &[32], GgmlType::Q8_0, vec![1; 34]);
    small.add_tensor_raw("u", &[32], 6, vec![2; 22]);
    vec![model, small.to_bytes()]
}

/// Runs every consumer on `bytes`; panics (test failure) only on a violated property.
fn exercise(bytes: &[u8], chunk: usize) {
    LARGEST.store(0, Ordering::Relaxed);
    let parsed = Gguf::parse(bytes);
    let mut r = GgufStreamReader::new();
    let mut events = Vec::new();
    let mut stream_ok = true;
    for c in bytes.chunks(chunk.max(1)) {
        match r.push(c) {
            Ok(e) => events.extend(e),
            Err(_) => {
                stream_ok = false;
                break;
            }
        }
    }
    let finished = stream_ok && r.finish().map(|e| events.extend(e)).is_ok();
    let header = Gguf::parse_header(bytes);
    if let Ok(g) = &parsed {
        assert!(finished, "stream rejected a file parse accepted");
        let Some(StreamEvent::Header(h)) = events.first() else {
            panic!("no header event")
        };
        // Debug text, not ==: a mutated f32 value may be NaN, which is never equal to itself.
        assert_eq!(format!("{h:?}"), format!("{g:?}"));
        assert_eq!(events.len(), 1 + g.tensors().len());
        for e in &events[1..] {
            let StreamEvent::Tensor { index, data } = e else {
                panic!("header twice")
            };
            let t = &g.tensors()[*index];
            assert_eq!(data.as_slice(), g.tensor_data(bytes, t).unwrap());
            let _ = dequantize_tensor(t, data);
        }
        let (h, _) = header
            .expect("parse_header failed")
            .expect("parse_header wanted more");
        assert_eq!(format!("{h:?}"), format!("{g:?}"));
        let _ = ModelConfig::from_gguf(g);
        let _ = g.metadata().get_str_array("tokenizer.ggml.tokens");
    }
    // Decoded data may legitimately be ~7x its bytes (Q4 -> f32); metadata ~3x.
    let largest = LARGEST.load(Ordering::Relaxed);
    assert!(
        largest <= 16 * bytes.len() + (1 << 16),
        "allocation of {largest} bytes for a {}-byte input",
        bytes.len()
    );
}

/// tests/fixtures/gguf/fuzz_regressions/*, compiled in so that the browser replays them too.
const FUZZ_REGRESSIONS: &[(&str, &[u8])] = &[(
    "huge_alignment_stream_disagreed.bin",
    include_bytes!("fixtures/gguf/fuzz_regressions/huge_alignment_stream_disagreed.bin"),
)];

/// Native only (it needs the filesystem): every file in the directory is in `FUZZ_REGRESSIONS`.
#[cfg(not(target_arch = "wasm32"))]
fn check_regressions_listed() {
    let dir = format!(
        "{}/tests/fixtures/gguf/fuzz_regressions",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    on_disk.sort();
    let mut listed: Vec<&str> = FUZZ_REGRESSIONS.iter().map(|r| r.0).collect();
    listed.sort();
    assert_eq!(
        on_disk, listed,
        "add new fuzz regressions to FUZZ_REGRESSIONS"
    );
}

fn check_mutated_files() {
    #[cfg(not(target_arch = "wasm32"))]
    check_regressions_listed();
    for (_, data) in FUZZ_REGRESSIONS {
        if let Some((&c, bytes)) = data.split_first() {
            exercise(bytes, 1 + c as usize * 3);
        }
    }
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut runs = 0usize;
    for seed in seeds() {
        exercise(&seed, 7);
        let header_len = Gguf::parse(&seed).unwrap().header_len as usize;
        // Truncation at every offset of the header and directory, and some in the data.
        for len in (0..=header_len + 64).chain((header_len..seed.len()).step_by(97)) {
            exercise(&seed[..len.min(seed.len())], 1 + len % 13);
            runs += 1;
        }
        // Each aligned-or-not position overwritten by extreme u64 / u32 values (counts,
        // lengths, dims, type ids, offsets live in such fields).
        let extremes: [u64; 8] = [
            0,
            1,
            0xff,
            1 << 31,
            u32::MAX as u64,
            1 << 40,
            u64::MAX / 2,
            u64::MAX,
        ];
        for pos in 0..header_len {
            for &v in &extremes {
                let mut m = seed.clone();
                let n = if rng.next() & 1 == 0 { 8 } else { 4 };
                let end = (pos + n).min(m.len());
                m[pos..end].copy_from_slice(&v.to_le_bytes()[..end - pos]);
                exercise(&m, 4096);
                runs += 1;
            }
        }
        // Random byte flips, splices and duplications.
        for _ in 0..3000 {
            let mut m = seed.clone();
            for _ in 0..1 + rng.below(4) {
                let pos = rng.below(m.len());
                match rng.below(5) {
                    0 => m[pos] ^= 1 << rng.below(8),
                    1 => m[pos] = rng.next() as u8,
                    2 => m.truncate(pos),
                    3 => {
                        let len = rng.below(64).min(m.len() - pos);
                        let chunk: Vec<u8> = m[pos..pos + len].to_vec();
                        let at = rng.below(m.len());
                        m.splice(at..at, chunk);
                    }
                    _ => {
                        let len = rng.below(16).min(m.len() - pos);
                        m.drain(pos..pos + len);
                    }
                }
                if m.is_empty() {
                    break;
                }
            }
            exercise(&m, 1 + rng.below(300));
            runs += 1;
        }
    }
    assert!(runs > 10_000, "only {runs} mutations ran");
}
cross_test!(
    mutated_files_never_panic_or_overallocate,
    check_mutated_files
);
