#!/usr/bin/env python3
"""llama.cpp's tokenization of a varied string set with a GGUF's vocabulary: the reference the
tokenizer tests hold fuselm to (tests/tokenizer_gemma3.rs). Not part of `npm test` (llama.cpp
builds from the PyPI sdist: ~15 minutes on 2 cores):

    pip install llama-cpp-python==0.3.36   # builds from source
    scripts/fetch-model gemma3
    python3 scripts/llama-cpp-tokenize.py models/gemma-3-270m-q4_k_m.gguf \\
        tests/fixtures/llama.cpp/gemma3/tokenize.jsonl

Each line: {"text", "ids"} with ids = llama_tokenize(text, add_special=True, parse_special=True);
the texts are the SmolLM2 fixture's, strings that exercise an SPM vocabulary (whitespace runs,
newlines, byte fallback, user-defined tokens, control tokens), and the exact reference's prompts.
"""
import json
import os
import sys

from llama_cpp import Llama

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
model, out = sys.argv[1:3]
texts = [json.loads(l)["text"] for l in open(os.path.join(ROOT, "tests/fixtures/llama.cpp/smollm2/tokenize.jsonl"))]
texts += [
    "",
    " ",
    "a",
    "The capital of France is",
    "  two leading spaces,\ttabs\t\tand   three spaces",
    "line one\nline two\n\n\nafter three newlines\r\nwindows",
    "trailing spaces   ",
    "Ünïcödé façade, naïve coöperation, Straße, ﬁ ligature",
    "中文分词测试，日本語のテキスト、한국어 문장",
    "emoji 🦀🚀 and a family 👨‍👩‍👧 plus flags 🇫🇷",
    "rare bytes: \u0001\u0002 and \u00a0non-breaking\u00a0space",
    "numbers 1234567890 3.14159 -42 1e-5 0x1F",
    "<table><tr><td>cell</td></tr></table> <b>bold</b>",
    "<start_of_turn>user\nHi there<end_of_turn>\n<start_of_turn>model\n",
    "<bos>text after a literal bos<eos>",
    "def f(x):\n    return x ** 2  # square\n\n\tindented with a tab",
    "UPPER lower MiXeD snake_case camelCase kebab-case",
    "a" * 40 + " " + "ab" * 20,
    "http://example.com/path?query=1&b=2#frag",
]
texts += [json.loads(l)["prompt"] for l in open(os.path.join(ROOT, "tests/fixtures/exact/gemma3/exact_greedy.jsonl"))]
llm = Llama(model_path=model, vocab_only=True, verbose=False)
with open(out, "w") as f:
    for t in texts:
        ids = llm.tokenize(t.encode("utf-8"), add_bos=True, special=True)
        f.write(json.dumps({"text": t, "ids": ids}, ensure_ascii=False) + "\n")
print(f"wrote {len(texts)} cases to {out}")
