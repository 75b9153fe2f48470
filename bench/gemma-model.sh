# Sourced by bench/exact-reference-gpu.sh and bench/gemma-gpu.sh on the lent GPU. Gemma 3 270M
# Q4_K_M (253 MB) is larger than one device call may carry, so it travels in five calls made
# while the machine is warm (the parts made here with
# `split -b 50622605 -d -a 2 models/gemma-3-270m-q4_k_m.gguf .bench-carry/gemma/gemma.part`):
# with PART=0..3 the call copies .bench-carry/gemma/gemma.part0$PART and stops; the call without
# PART copies part 4 when carried, assembles and checks the model. After sourcing: $M is the model.
set -euo pipefail
D=/root/fuselm-gemma
mkdir -p $D
if [ -n "${PART:-}" ]; then
  cp .bench-carry/gemma/gemma.part0$PART $D/
  exit 0
fi
if [ -f .bench-carry/gemma/gemma.part04 ]; then cp .bench-carry/gemma/gemma.part04 $D/; fi
M=$D/gemma-3-270m-q4_k_m.gguf
[ -f $M ] || cat $D/gemma.part0{0,1,2,3,4} > $M
echo "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818  $M" | sha256sum --check
