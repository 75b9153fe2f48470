#!/usr/bin/env bash
# Makes the exact reference of Gemma 3 270M Q4_K_M (tests/fixtures/exact/gemma3/) on the lent GPU machine with
# scripts/exact-reference.py. The model travels in five calls (bench/gemma-model.sh: PART=0..3);
#   last call (no PART): carry .bench-carry/gemma/gemma.part04 and the gguf wheel
#   (`pip download --no-deps gguf -d .bench-carry/gemma`); results come back under $OUT.
source bench/gemma-model.sh
python3 -m pip install -q --no-index --no-deps --target /tmp/site .bench-carry/gemma/gguf-*.whl
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)"
python3 scripts/exact-reference.py $M tests/fixtures/exact/gemma3/spec.json "$OUT/gemma3"
