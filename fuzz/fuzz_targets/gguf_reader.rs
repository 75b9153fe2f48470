//! Fuzzes the whole GGUF module: whole-file parse, header-prefix parse, the stream reader
//! with input-dependent chunk sizes, ModelConfig, and dequantization of every tensor.
//! Properties beyond "no panic": when `Gguf::parse` accepts the input, the stream reader
//! and `parse_header` must accept it too and agree on the header and every tensor's bytes.
//!
//! Run: `cd fuzz && RUSTC_BOOTSTRAP=1 cargo fuzz run gguf_reader corpus/gguf_reader ../tests/fixtures/gguf/broken`
#![no_main]

use fuselm::gguf::{dequantize_tensor, Gguf, GgufStreamReader, ModelConfig, StreamEvent};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First byte picks the stream chunk size so chunk boundaries get fuzzed too.
    let (chunk, bytes) = match data.split_first() {
        Some((&c, rest)) => (1 + c as usize * 3, rest),
        None => (1, data),
    };
    let parsed = Gguf::parse(bytes);
    let header = Gguf::parse_header(bytes);

    let mut reader = GgufStreamReader::new();
    let mut events = Vec::new();
    let mut stream_ok = true;
    for c in bytes.chunks(chunk) {
        match reader.push(c) {
            Ok(e) => events.extend(e),
            Err(_) => {
                stream_ok = false;
                break;
            }
        }
    }
    let stream_ok = stream_ok && reader.finish().map(|e| events.extend(e)).is_ok();

    let Ok(g) = parsed else { return };
    assert!(stream_ok, "stream rejected a file that parse accepted");
    let (h, _) = header.expect("parse_header failed on a valid file").expect("parse_header wanted more bytes");
    // Debug text, not ==: metadata floats may be NaN.
    assert_eq!(format!("{h:?}"), format!("{g:?}"));
    match events.first() {
        Some(StreamEvent::Header(sh)) => assert_eq!(format!("{sh:?}"), format!("{g:?}")),
        _ => panic!("stream did not start with the header"),
    }
    assert_eq!(events.len(), 1 + g.tensors().len());
    for e in &events[1..] {
        let StreamEvent::Tensor { index, data } = e else { panic!("second header event") };
        let t = &g.tensors()[*index];
        assert_eq!(data.as_slice(), g.tensor_data(bytes, t).expect("parse checked bounds"));
        if let Ok(v) = dequantize_tensor(t, data) {
            assert_eq!(v.len() as u64, t.n_elements);
        }
    }
    let _ = ModelConfig::from_gguf(&g);
});
