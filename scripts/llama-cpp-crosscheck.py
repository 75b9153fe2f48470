#!/usr/bin/env python3
"""How far llama.cpp on *this* machine is from the llama.cpp fixtures (tests/fixtures/llama.cpp).

The fixtures were made by llama-cpp-python 0.3.36 (CPU) on another machine. Running the same
version here shows how much llama.cpp's own logits move between machines/builds, i.e. the noise
floor any comparison with the fixtures has to live with. Not part of `npm test` (it builds
llama.cpp from the PyPI sdist: ~15 minutes on 2 cores):

    pip install llama-cpp-python==0.3.36   # builds from source
    scripts/fetch-model
    python3 scripts/llama-cpp-crosscheck.py

Prints JSON: first-step top-5 logit differences, teacher-forcing agreement at margin >= 0.1,
and the issue's greedy rule (ids equal up to 32 tokens or the first margin < 0.1) per prompt.
"""
import json
import os
import sys

import numpy as np
from llama_cpp import Llama

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
MODEL = os.path.join(ROOT, "models", "SmolLM2-135M-Instruct.Q4_1.gguf")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "llama.cpp", "smollm2", "greedy.jsonl")


def main() -> None:
    cases = [json.loads(line) for line in open(FIXTURES) if line.strip()]
    llm = Llama(model_path=MODEL, n_ctx=512, logits_all=True, verbose=False)
    top5, forced, agree, prompts = [], 0, 0, []
    for case in cases:
        p, g, m = case["prompt_ids"], case["greedy_ids"], case["top2_margin"]
        llm.reset()
        llm.eval(p + g)
        scores = np.array(llm.scores[: len(p) + len(g)])
        for i, step in enumerate(case["top5_first_steps"]):
            top5 += [abs(float(scores[len(p) + i - 1][t]) - v) for t, v in step]
        for i, want in enumerate(g):
            if m[i] >= 0.1:
                forced += 1
                agree += int(np.argmax(scores[len(p) + i - 1]) == want)
        llm.reset()
        llm.eval(p)
        ids = []
        for _ in range(32):
            ids.append(int(np.argmax(llm.scores[llm.n_tokens - 1])))
            llm.eval([ids[-1]])
        need = min(next((i for i, x in enumerate(m) if x < 0.1), len(m)), 32)
        equal = next((i for i, (a, b) in enumerate(zip(ids, g)) if a != b), 32)
        prompts.append({"prompt": case["prompt"], "equalTokens": equal, "ruleNeeds": need, "ruleMet": equal >= need})
    json.dump(
        {
            "llamaCppPython": "0.3.36",
            "top5FirstSteps": {"maxAbsDiff": max(top5), "meanAbsDiff": float(np.mean(top5))},
            "teacherForcing": {"agree": agree, "positions": forced},
            "greedy": prompts,
        },
        sys.stdout,
        indent=1,
    )
    print()


if __name__ == "__main__":
    main()
