#!/bin/sh
# vkgrad-gpt against hf_gpt.py (an independent PyTorch GPT-2, in float64) on small random GPT-2
# folders written by make_hf_gpt2.py: the first window's logits, greedy ids and text, and the
# eval loss, for an f32 folder, a sharded one without the "transformer." prefix, a bf16 one,
# and the f32 one fine-tuned by `vkgrad-gpt train --init` (saved in the same layout).
#   bench/peers/compare_hf_gpt2.sh [BUILD_DIR]      (default: build)
# Needs python3-torch and python3-numpy (Debian's /usr/bin/python3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
gpt="$build/apps/vkgrad-gpt"
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 6000 /usr/share/common-licenses/Apache-2.0 > "$work/data.txt"
prompt="The licence"
for variant in "f32" "sharded --shards 3 --no-prefix" "bf16 --dtype bf16"; do
  set -- $variant
  name=$1
  shift
  folder="$work/$name"
  $py "$here/make_hf_gpt2.py" --out "$folder" --context 64 "$@" > /dev/null
  echo "== $name: $(cat "$folder/config.json" | tr -d '\n ' | cut -c1-120)..."
  "$gpt" eval --checkpoint "$folder" --data "$work/data.txt" --json --logits "$work/vk.npy" \
    > "$work/vk_eval.json"
  echo "logits (first window)  $($py "$here/hf_gpt.py" logits --model "$folder" \
    --data "$work/data.txt" --compare "$work/vk.npy")"
  echo "eval vkgrad            $(tail -1 "$work/vk_eval.json")"
  echo "eval torch (f64)       $($py "$here/hf_gpt.py" eval --model "$folder" --data "$work/data.txt")"
  "$gpt" sample --checkpoint "$folder" --prompt "$prompt" --tokens 40 --top-k 1 --json \
    2> /dev/null > "$work/vk_greedy.json"
  $py "$here/hf_gpt.py" greedy --model "$folder" --prompt "$prompt" --tokens 40 \
    > "$work/torch_greedy.json"
  $py - "$work/vk_greedy.json" "$work/torch_greedy.json" "$work/vk_eval.json" <<'PY'
import json, sys
vk, pt = (json.loads(open(p).read().splitlines()[-1]) for p in sys.argv[1:3])
print("greedy ids identical  ", vk["ids"] == pt["ids"], "text identical", vk["text"] == pt["text"])
PY
done
# A folder fine-tuned by vkgrad-gpt (20 steps), read back by the PyTorch reader.
"$gpt" train --init "$work/f32" --data "$work/data.txt" --steps 20 --batch 4 --out "$work/tuned" \
  > /dev/null 2>&1
echo "== tuned: vkgrad-gpt train --init f32, 20 steps"
"$gpt" eval --checkpoint "$work/tuned" --data "$work/data.txt" --json --logits "$work/vk.npy" \
  > "$work/vk_eval.json"
echo "logits (first window)  $($py "$here/hf_gpt.py" logits --model "$work/tuned" \
  --data "$work/data.txt" --compare "$work/vk.npy")"
echo "eval vkgrad            $(tail -1 "$work/vk_eval.json")"
echo "eval torch (f64)       $($py "$here/hf_gpt.py" eval --model "$work/tuned" --data "$work/data.txt")"
