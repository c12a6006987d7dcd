#!/bin/sh
# vkgrad-gpt against hf_llama.py (an independent PyTorch Llama/Qwen2, in float64, run through
# hf_gpt.py) on small random folders with grouped-query attention (6 heads, 2 key/value heads)
# written by make_hf_llama.py: the first window's logits, greedy ids and text, and the eval
# loss, for an untied Llama, a tied Qwen2 (q/k/v biases, a padded vocabulary), a Llama with
# attention_bias and a small rope_theta, a bf16 Llama, and the Llama fine-tuned by
# `vkgrad-gpt train --init` (saved in the same layout) read back by PyTorch.
#   bench/peers/compare_hf_llama.sh [BUILD_DIR]      (default: build)
# Needs python3-torch and python3-numpy (Debian's /usr/bin/python3).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
gpt="$build/apps/vkgrad-gpt"
py=/usr/bin/python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
head -c 6000 /usr/share/common-licenses/Apache-2.0 > "$work/data.txt"
for variant in "llama" "qwen2 --qwen2 --tied --pad 3" "llama-bias --attention-bias --rope-theta 500" \
  "bf16 --dtype bf16"; do
  set -- $variant
  name=$1
  shift
  folder="$work/$name"
  $py "$here/make_hf_llama.py" --out "$folder" "$@" > /dev/null
  echo "== $name: $(tr -d '\n ' < "$folder/config.json" | cut -c1-160)..."
  "$here/compare_hf_folder.sh" "$gpt" "$folder" "$work/data.txt" "$work"
done
"$gpt" train --init "$work/llama" --data "$work/data.txt" --steps 20 --batch 4 --out "$work/tuned" \
  > /dev/null 2>&1
echo "== tuned: vkgrad-gpt train --init llama, 20 steps, read back"
"$here/compare_hf_folder.sh" "$gpt" "$work/tuned" "$work/data.txt" "$work"
