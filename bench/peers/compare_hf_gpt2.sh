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
  "$here/compare_hf_folder.sh" "$gpt" "$folder" "$work/data.txt" "$work" "$prompt"
done
# A folder fine-tuned by vkgrad-gpt (20 steps), read back by the PyTorch reader.
"$gpt" train --init "$work/f32" --data "$work/data.txt" --steps 20 --batch 4 --out "$work/tuned" \
  > /dev/null 2>&1
echo "== tuned: vkgrad-gpt train --init f32, 20 steps"
"$here/compare_hf_folder.sh" "$gpt" "$work/tuned" "$work/data.txt" "$work" "$prompt"
