#!/bin/sh
# 20 fine-tuning steps of vkgrad-gpt against hf_gpt_train.py (PyTorch, float64) on a small
# random GPT-2 folder written by make_hf_gpt2.py (or a Llama or Qwen2 one by make_hf_llama.py:
# grouped-query attention, vkgrad's fused q/k/v and gate/up products adapted in column blocks,
# PyTorch's seven nn.Linear modules one adapter each): every weight (train --init), then LoRA
# adapters (train --init --adapter) from one PEFT adapter folder both sides read. Both draw
# the same rows (std::mt19937_64 from --seed) with AdamW at a constant learning rate, no
# clipping; vkgrad's losses come from the run's train_state.safetensors (one per step with
# --log-every 1). Prints the largest difference of the 20 losses; fails above 1e-4. Then the
# adapters vkgrad saved (PEFT's layout) are read back by the PyTorch side: eval losses.
#   bench/peers/compare_hf_gpt2_train.sh [BUILD_DIR [gpt2|llama|qwen2 [TARGETS]]]
# (default: build gpt2, every product adapted; TARGETS: the adapters' target_modules, such as
# q_proj,v_proj,up_proj, which leaves columns of the fused products without one)
# Needs python3-torch and python3-numpy (Debian's /usr/bin/python3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
model=${2:-gpt2}
targets=${3:-}
gpt="$build/apps/vkgrad-gpt"
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 6000 /usr/share/common-licenses/Apache-2.0 > "$work/data.txt"
case "$model" in
  gpt2) $py "$here/make_hf_gpt2.py" --out "$work/base" --context 32 > /dev/null ;;
  llama) $py "$here/make_hf_llama.py" --out "$work/base" --context 32 > /dev/null ;;
  qwen2) $py "$here/make_hf_llama.py" --out "$work/base" --context 32 --qwen2 --tied > /dev/null ;;
  *) echo "model: gpt2, llama or qwen2" >&2; exit 2 ;;
esac
$py "$here/hf_gpt_train.py" init-adapter --model "$work/base" --out "$work/adapter" --rank 4 \
  --alpha 8 ${targets:+--targets "$targets"}
common="--steps 20 --batch 4 --lr 1e-3 --weight-decay 0.1 --seed 7"
for mode in full lora; do
  extra=""
  [ "$mode" = lora ] && extra="--adapter $work/adapter"
  # shellcheck disable=SC2086
  "$gpt" train --init "$work/base" --data "$work/data.txt" $common $extra --schedule constant \
    --warmup 0 --clip 0 --log-every 1 --eval-every 0 --out "$work/vk_$mode" > "$work/vk_$mode.log"
  # shellcheck disable=SC2086
  $py "$here/hf_gpt_train.py" train --model "$work/base" --data "$work/data.txt" $common $extra \
    > "$work/pt_$mode.json"
  $py - "$mode" "$work/vk_$mode/train_state.safetensors" "$work/pt_$mode.json" <<'PY'
import json, struct, sys
mode, state, peer = sys.argv[1:4]
with open(state, "rb") as f:
    (n,) = struct.unpack("<Q", f.read(8))
    meta = json.loads(f.read(n))["__metadata__"]
vk = [y for _, y in json.loads(meta["run.curves"])["train loss"]]
pt = json.load(open(peer))["losses"]
assert len(vk) == len(pt) == 20, (len(vk), len(pt))
diff = [abs(a - b) for a, b in zip(vk, pt)]
worst = max(range(20), key=lambda i: diff[i])
print(f"{mode:4s}: 20 losses {pt[0]:.6f} -> {pt[-1]:.6f} (torch f64); max |vkgrad - torch| "
      f"{diff[worst]:.2e} at step {worst + 1}; mean {sum(diff) / 20:.2e}")
if diff[worst] > 1e-4:
    for i, (a, b) in enumerate(zip(vk, pt)):
        print(f"  step {i + 1:2d}  vkgrad {a:.7f}  torch {b:.7f}")
    sys.exit(1)
PY
done
echo "== the adapters vkgrad-gpt saved, read back"
echo "eval vkgrad            $("$gpt" eval --checkpoint "$work/vk_lora" --data "$work/data.txt" --json)"
echo "eval torch (f64)       $($py "$here/hf_gpt_train.py" eval --model "$work/base" \
  --adapter "$work/vk_lora" --data "$work/data.txt")"
