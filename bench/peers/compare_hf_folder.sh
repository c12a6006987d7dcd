#!/bin/sh
# One Hugging Face folder through vkgrad-gpt and hf_gpt.py (which reads gpt2, llama and qwen2
# folders; float64): the first window's logits, the eval loss, and greedy ids and text.
#   compare_hf_folder.sh VKGRAD_GPT FOLDER DATA_FILE WORK_DIR [PROMPT]
# Called by compare_hf_gpt2.sh and compare_hf_llama.sh.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
gpt=$1
folder=$2
data=$3
work=$4
prompt=${5:-The licence}
py=/usr/bin/python3
"$gpt" eval --checkpoint "$folder" --data "$data" --json --logits "$work/vk.npy" > "$work/vk_eval.json"
echo "logits (first window)  $($py "$here/hf_gpt.py" logits --model "$folder" --data "$data" \
  --compare "$work/vk.npy")"
echo "eval vkgrad            $(tail -1 "$work/vk_eval.json")"
echo "eval torch (f64)       $($py "$here/hf_gpt.py" eval --model "$folder" --data "$data")"
"$gpt" sample --checkpoint "$folder" --prompt "$prompt" --tokens 40 --top-k 1 --json \
  2> /dev/null > "$work/vk_greedy.json"
$py "$here/hf_gpt.py" greedy --model "$folder" --prompt "$prompt" --tokens 40 \
  > "$work/torch_greedy.json"
$py - "$work/vk_greedy.json" "$work/torch_greedy.json" "$work/vk_eval.json" <<'PY'
import json, sys
vk, pt = (json.loads(open(p).read().splitlines()[-1]) for p in sys.argv[1:3])
print("greedy ids identical  ", vk["ids"] == pt["ids"], "text identical", vk["text"] == pt["text"])
PY
