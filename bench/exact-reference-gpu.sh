#!/usr/bin/env bash
# Makes the exact reference of Gemma 3 270M Q4_K_M (tests/fixtures/exact/gemma3/) on the lent GPU machine with
# scripts/exact-reference.py. The model (253 MB) travels in five calls made while the machine is warm:
#   split -b 50622605 -d -a 2 models/gemma-3-270m-q4_k_m.gguf .bench-carry/gemma/gemma.part
#   PART=0..3: carry .bench-carry/gemma/gemma.part0$PART; the call copies it and stops.
#   last call (no PART): carry .bench-carry/gemma/gemma.part04 and the gguf wheel
#   (`pip download --no-deps gguf -d .bench-carry/gemma`); results come back under $OUT.
set -euo pipefail
D=/root/fuselm-gemma
mkdir -p $D
if [ -n "${PART:-}" ]; then
  cp .bench-carry/gemma/gemma.part0$PART $D/
  exit 0
fi
cp .bench-carry/gemma/gemma.part04 $D/
M=$D/gemma-3-270m-q4_k_m.gguf
[ -f $M ] || cat $D/gemma.part0{0,1,2,3,4} > $M
echo "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818  $M" | sha256sum --check
python3 -m pip install -q --no-index --no-deps --target /tmp/site .bench-carry/gemma/gguf-*.whl
export PYTHONPATH=/tmp/site
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import transformers, torch; print('transformers', transformers.__version__, 'torch', torch.__version__)"
python3 scripts/exact-reference.py $M tests/fixtures/exact/gemma3/spec.json "$OUT/gemma3"
