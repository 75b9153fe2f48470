#!/usr/bin/env python3
"""Exact reference for a GGUF model (the correctness oracle of tests/generate_*.rs).

Hugging Face transformers loads the GGUF (weights dequantized by gguf-py) and evaluates it in float64, and in
float32 to measure f32 noise, on the lent GPU machine (`bench/gpu exact-reference --make` runs it there). Adapted from
../shared/tools/exact_reference/make_exact.py, which made the SmolLM2 reference; the changes: BOS is added when the
GGUF asks for it (tokenizer.ggml.add_bos_token, as llama.cpp and fuselm do), a model without a chat template takes
raw prompts only, prompt ids may come from the spec (see below), and meta.json names the model class and library versions.

usage: python3 exact-reference.py MODEL.gguf SPEC.json OUTDIR
SPEC: {"n_generate": 64, "<set name>": [{"prompt": str, "chat": bool, "prompt_ids": [int] (optional)}, ...], ...}. Writes OUTDIR/<set>.jsonl with one
line per prompt: prompt, chat, rendered, prompt_ids, greedy_ids (f64), text, top2_margin, top5_first_steps,
f32_greedy_ids, f32_max_abs_dlogit (teacher-forced f64 vs f32), and OUTDIR/meta.json.
"""
import hashlib, json, os, sys, time
import gguf, jinja2, torch, transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
mp, spec_path, out = sys.argv[1:4]
spec = json.load(open(spec_path))
N = spec["n_generate"]
os.makedirs(out, exist_ok=True)
d, fn = os.path.dirname(os.path.abspath(mp)), os.path.basename(mp)
t0 = time.time()
tok = AutoTokenizer.from_pretrained(d, gguf_file=fn)
m32 = AutoModelForCausalLM.from_pretrained(d, gguf_file=fn, dtype=torch.float32).cuda().eval()
m64 = AutoModelForCausalLM.from_pretrained(d, gguf_file=fn, dtype=torch.float32).to(torch.float64).cuda().eval()
print("loaded", type(m64).__name__, "in", round(time.time() - t0, 1), "s", flush=True)

r = gguf.GGUFReader(mp)
field = lambda k: r.fields[k].contents() if k in r.fields else None
template = field("tokenizer.chat_template")
bos, add_bos = field("tokenizer.ggml.bos_token_id"), bool(field("tokenizer.ggml.add_bos_token"))
EOG = {int(field("tokenizer.ggml.eos_token_id"))}
for name in ("<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<|eot_id|>"):
    i = tok.convert_tokens_to_ids(name)
    if isinstance(i, int) and i != tok.unk_token_id:
        EOG.add(i)
print("end-of-generation ids", sorted(EOG), "add_bos", add_bos, "bos", bos, flush=True)


def encode(text):
    ids = tok(text, add_special_tokens=False)["input_ids"]
    if add_bos and (not ids or ids[0] != bos):
        ids = [bos] + ids
    return ids


@torch.no_grad()
def greedy(m, ids):
    res = m(torch.tensor([ids], device="cuda"), use_cache=True)
    past, logits = res.past_key_values, res.logits[0, -1]
    gen, margins, top = [], [], []
    for i in range(N):
        v, ix = torch.topk(logits, 5)
        margins.append(round(float(v[0] - v[1]), 5))
        if i < 4:
            top.append([[int(j), float(x)] for j, x in zip(ix, v)])
        nxt = int(ix[0])
        gen.append(nxt)
        if nxt in EOG:
            break
        res = m(torch.tensor([[nxt]], device="cuda"), past_key_values=past, use_cache=True)
        past, logits = res.past_key_values, res.logits[0, -1]
    return gen, margins, top


@torch.no_grad()
def forced(m, seq):
    return m(torch.tensor([seq], device="cuda")).logits[0].double()


for split in [k for k, v in spec.items() if isinstance(v, list)]:
    with open(f"{out}/{split}.jsonl", "w") as fo:
        for g in spec[split]:
            p = g["prompt"]
            if g["chat"]:
                if template is None:
                    sys.exit(f"{fn} has no chat template: chat prompts cannot be rendered")
                tmpl = jinja2.Environment().from_string(template)
                text = tmpl.render(messages=[{"role": "user", "content": p}], add_generation_prompt=True,
                                   bos_token=tok.bos_token or "", eos_token=tok.eos_token or "")
            else:
                text = p
            # Ids from the spec when it has them: transformers' conversion of a GGUF vocabulary is not always the
            # model's tokenizer (for Gemma 3 it splits " capital" into four pieces), so the spec may carry ids made
            # by a tokenizer checked elsewhere; the model itself is then what this script references.
            ids = g.get("prompt_ids") or encode(text)
            hf_ids = encode(text)
            gi, mg, top = greedy(m64, ids)
            g32, _, _ = greedy(m32, ids)
            seq = ids + gi
            dmax = float((forced(m64, seq) - forced(m32, seq)).abs().max())
            rec = {"prompt": p, "chat": g["chat"], "rendered": text, "prompt_ids": ids, "greedy_ids": gi,
                   "text": tok.decode(gi), "top2_margin": mg, "top5_first_steps": top,
                   "f32_greedy_ids": g32, "f32_max_abs_dlogit": round(dmax, 6),
                   "hf_tokenizer_agrees": hf_ids == ids}
            fo.write(json.dumps(rec, ensure_ascii=False) + "\n")
            same = next((i for i, (a, b) in enumerate(zip(gi, g32)) if a != b), min(len(gi), len(g32)))
            print(f"{split:8s} {len(ids):4d} prompt tok, {len(gi):3d} gen, min margin(32) {min(mg[:32]):.4f}, "
                  f"f32 agrees {same}/{len(gi)}, max|f64-f32| {dmax:.2e}  {p[:40]!r} -> {tok.decode(gi)[:60]!r}",
                  flush=True)
sha = hashlib.sha256(open(mp, "rb").read()).hexdigest()
json.dump({"model": fn, "sha256": sha,
           "reference": f"transformers {type(m64).__name__} float64, gguf-py dequantization",
           "transformers": transformers.__version__, "torch": torch.__version__,
           "gguf": getattr(gguf, "__version__", "?")}, open(f"{out}/meta.json", "w"), indent=1)
print("done")
