// A tinier random Llama GGUF than `fuselm synthetic-model` writes, for the site tests that load or
// generate many times: one layer, d_model 64, Q8_0 weights only (one family of kernels to compile).
// Same vocabulary and template as the Rust synthetic model (src/model/synthetic.rs): the 256
// byte-level tokens of GPT-2 plus <|im_start|> (BOS, 256) and <|im_end|> (EOS, 257), ChatML.
// SwiftShader decodes this one ~10x faster than the 3-layer synthetic model and compiles it faster.
import { mkdirSync, writeFileSync } from "node:fs";
import { dirname } from "node:path";

const spec = { layers: 1, embd: 64, ff: 256, heads: 2, kvHeads: 2, context: 512, seed: 11 };
const VOCAB = 258;
const Q8_0 = 8, F32 = 0; // ggml type ids
const ALIGN = 32;

/** GPT-2's byte → printable character mapping (`bytes_to_unicode`). */
function byteAlphabet() {
  const direct = [];
  for (const [a, b] of [[0x21, 0x7e], [0xa1, 0xac], [0xae, 0xff]]) for (let c = a; c <= b; c++) direct.push(c);
  let n = 0;
  return Array.from({ length: 256 }, (_, b) => String.fromCodePoint(direct.includes(b) ? b : 256 + n++));
}

function f16(x) {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  const sign = (u >>> 16) & 0x8000;
  const exp = ((u >>> 23) & 0xff) - 127 + 15;
  let mant = u & 0x7fffff;
  if (exp <= 0) return sign; // the scales here are never subnormal
  if (exp >= 31) return sign | 0x7c00;
  let h = sign | (exp << 10) | (mant >>> 13);
  mant &= 0x1fff;
  if (mant > 0x1000 || (mant === 0x1000 && h & 1)) h++; // round to nearest even
  return h;
}

function quantizeQ8_0(values) {
  const out = Buffer.alloc((values.length / 32) * 34);
  for (let b = 0; b < values.length / 32; b++) {
    const block = values.subarray(b * 32, b * 32 + 32);
    const d = block.reduce((m, v) => Math.max(m, Math.abs(v)), 0) / 127;
    const id = d ? 1 / d : 0;
    out.writeUInt16LE(f16(d), b * 34);
    for (let i = 0; i < 32; i++) out.writeInt8(Math.round(block[i] * id), b * 34 + 2 + i);
  }
  return out;
}

class Writer {
  parts = [];
  u32(x) { const b = Buffer.alloc(4); b.writeUInt32LE(x); this.parts.push(b); }
  i32(x) { const b = Buffer.alloc(4); b.writeInt32LE(x); this.parts.push(b); }
  u64(x) { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(x)); this.parts.push(b); }
  f32(x) { const b = Buffer.alloc(4); b.writeFloatLE(x); this.parts.push(b); }
  str(s) { const b = Buffer.from(s, "utf8"); this.u64(b.length); this.parts.push(b); }
  bytes() { return Buffer.concat(this.parts); }
}

/** The GGUF bytes. */
export function tinyLlama() {
  let state = BigInt(spec.seed) * 0x9e3779b97f4a7c15n | 1n;
  const mask = (1n << 64n) - 1n;
  const random = (n, scale) => {
    const v = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      state ^= (state << 13n) & mask;
      state ^= state >> 7n;
      state ^= (state << 17n) & mask;
      v[i] = (Number(state >> 40n) / 2 ** 23 - 1) * scale;
    }
    return v;
  };
  const { layers, embd: e, ff: f, heads, kvHeads } = spec;
  const headDim = e / heads;
  const kv = kvHeads * headDim;
  const meta = [
    ["general.architecture", "str", "llama"],
    ["general.name", "str", "fuselm tiny test llama"],
    ["llama.block_count", "u32", layers],
    ["llama.context_length", "u32", spec.context],
    ["llama.embedding_length", "u32", e],
    ["llama.feed_forward_length", "u32", f],
    ["llama.attention.head_count", "u32", heads],
    ["llama.attention.head_count_kv", "u32", kvHeads],
    ["llama.rope.dimension_count", "u32", headDim],
    ["llama.rope.freq_base", "f32", 10000],
    ["llama.attention.layer_norm_rms_epsilon", "f32", 1e-5],
    ["tokenizer.ggml.model", "str", "gpt2"],
    ["tokenizer.ggml.pre", "str", "smollm"],
    ["tokenizer.ggml.tokens", "strs", [...byteAlphabet(), "<|im_start|>", "<|im_end|>"]],
    ["tokenizer.ggml.token_type", "i32s", [...Array(256).fill(1), 3, 3]],
    ["tokenizer.ggml.merges", "strs", []],
    ["tokenizer.ggml.bos_token_id", "u32", 256],
    ["tokenizer.ggml.eos_token_id", "u32", 257],
    ["tokenizer.chat_template", "str",
      "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"],
  ];
  const tensors = [];
  const matrix = (name, k, n) => tensors.push({ name, dims: [k, n], type: Q8_0, data: quantizeQ8_0(random(k * n, Math.sqrt(3 / k))) });
  const ones = (name, n) => tensors.push({ name, dims: [n], type: F32, data: Buffer.from(new Float32Array(n).fill(1).buffer) });
  matrix("token_embd.weight", e, VOCAB);
  for (let i = 0; i < layers; i++) {
    ones(`blk.${i}.attn_norm.weight`, e);
    matrix(`blk.${i}.attn_q.weight`, e, e);
    matrix(`blk.${i}.attn_k.weight`, e, kv);
    matrix(`blk.${i}.attn_v.weight`, e, kv);
    matrix(`blk.${i}.attn_output.weight`, e, e);
    ones(`blk.${i}.ffn_norm.weight`, e);
    matrix(`blk.${i}.ffn_gate.weight`, e, f);
    matrix(`blk.${i}.ffn_up.weight`, e, f);
    matrix(`blk.${i}.ffn_down.weight`, f, e);
  }
  ones("output_norm.weight", e);

  const w = new Writer();
  w.parts.push(Buffer.from("GGUF"));
  w.u32(3);
  w.u64(tensors.length);
  w.u64(meta.length);
  const TYPE = { u32: 4, i32: 5, f32: 6, str: 8 };
  for (const [key, type, value] of meta) {
    w.str(key);
    if (type === "strs" || type === "i32s") {
      w.u32(9); // array
      w.u32(type === "strs" ? 8 : 5);
      w.u64(value.length);
      for (const v of value) (type === "strs" ? w.str(v) : w.i32(v));
    } else {
      w.u32(TYPE[type]);
      w[type](value);
    }
  }
  let offset = 0;
  for (const t of tensors) {
    w.str(t.name);
    w.u32(t.dims.length);
    for (const d of t.dims) w.u64(d);
    w.u32(t.type);
    w.u64(offset);
    offset = Math.ceil((offset + t.data.length) / ALIGN) * ALIGN;
  }
  let out = w.bytes();
  const chunks = [out];
  let length = out.length;
  for (const t of tensors) {
    const pad = Math.ceil(length / ALIGN) * ALIGN - length;
    chunks.push(Buffer.alloc(pad), t.data);
    length += pad + t.data.length;
  }
  return Buffer.concat(chunks);
}

/** Writes the model to `path` (under the repository root); returns its size. */
export function writeTinyModel(path) {
  const bytes = tinyLlama();
  mkdirSync(dirname(path), { recursive: true });
  writeFileSync(path, bytes);
  return bytes.length;
}
