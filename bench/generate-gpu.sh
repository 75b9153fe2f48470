#!/usr/bin/env bash
# Greedy generation of SmolLM2-135M-Instruct Q4_1 on the lent GPU with the current engine, as a
# baseline: `fuselm generate --json` for the llama.cpp fixture prompts. The model (98 MB) is larger
# than one device call may carry, so it travels in two parts: call this once with PART=1 (carry
# .bench-carry/smollm2.part00) and once with PART=2 (carry .bench-carry/smollm2.part01, .gl and
# target/release/fuselm) while the machine is still warm; the second call assembles and runs.
set -euo pipefail
mkdir -p /root/fuselm-model
if [ "${PART:-2}" = 1 ]; then
  cp .bench-carry/smollm2.part00 /root/fuselm-model/
  exit 0
fi
cp .bench-carry/smollm2.part01 /root/fuselm-model/
cat /root/fuselm-model/smollm2.part00 /root/fuselm-model/smollm2.part01 > /root/fuselm-model/model.gguf
echo "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53  /root/fuselm-model/model.gguf" | sha256sum --check
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
./target/release/fuselm probe >/dev/null 2>&1 || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
M=/root/fuselm-model/model.gguf
RUNS=$(mktemp -d)
i=0
while IFS= read -r prompt; do
  chat=$( [ "$i" -ge 3 ] && echo --chat || true )
  for steps in 1 16 64; do
    ./target/release/fuselm generate --model $M --prompt "$prompt" $chat --max-tokens 128 \
      --steps-per-submit $steps --json > "$RUNS/gen-$i-$steps.json"
  done
  i=$((i + 1))
done <<'PROMPTS'
The capital of France is
Once upon a time, there was a little robot who
def add(a, b):
What is the boiling point of water?
Write a haiku about graphics cards.
PROMPTS
python3 - "$RUNS" "$OUT" "${FUSELM_COMMIT:-unknown}" <<'PY'
import json, os, sys, glob, datetime, subprocess
runs_dir, out, commit = sys.argv[1:4]
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
runs = []
for p in sorted(glob.glob(os.path.join(runs_dir, "gen-*.json"))):
    d = json.load(open(p)); t = d["timings"]["generate"]
    steps = int(p.rsplit("-", 1)[1].split(".")[0])
    runs.append({"prompt": d["prompt"], "chat": d["chat"], "stepsPerSubmit": steps, "promptTokens": len(d["promptIds"]),
                 "generatedTokens": len(d["generatedIds"]), "stopReason": d["stopReason"], **t,
                 "loadSeconds": d["timings"]["loadSeconds"], "generatedIds": d["generatedIds"]})
res = {"kind": "generate-baseline", "model": "SmolLM2-135M-Instruct.Q4_1.gguf", "device": gpu,
       "date": datetime.date.today().isoformat(), "commit": commit,
       "command": "fuselm generate --json --max-tokens 128 --steps-per-submit {1,16,64}", "runs": runs}
json.dump(res, open(os.path.join(out, "generate-baseline.json"), "w"), indent=1)
for r in runs:
    print(f'{r["stepsPerSubmit"]:>3} steps/submit  prefill {r["promptTokensPerSecond"]:8.1f} tok/s  decode {r["decodeTokensPerSecond"]:8.1f} tok/s  {r["generatedTokens"]} tok  {r["prompt"][:30]!r}')
PY
