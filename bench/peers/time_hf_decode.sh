#!/bin/sh
# Decoding ms per token (KV cache, batch 1, greedy) and one fine-tuning step's ms (every weight,
# and LoRA rank 8 on every product) of vkgrad-gpt against PyTorch CPU eager (time_hf_torch.py,
# float32 arithmetic) at the published shapes of GPT-2 124M, SmolLM2-135M and SmolLM2-360M, on
# random weights (no network: make_hf_gpt2.py / make_hf_llama.py write the folders, with the
# small tokenizer and the vocabulary padded to the published size). The two sides alternate,
# ROUNDS rounds; each line gives every round's median ms (decoding: the tokens after the
# first, whose time also runs the prompt; training: the steps after the first), then the
# median of the rounds.
#   bench/peers/time_hf_decode.sh [BUILD_DIR [ROUNDS [TOKENS [STEPS [MODELS [WHAT]]]]]]
#   (default: build 3 32 4 "gpt2-124m smollm2-135m smollm2-360m smollm2-8l" "decode full lora";
#   WORK=DIR keeps the generated folders there between runs (1.7 GB for all four),
#   THREADS=2 PyTorch's threads, VOCAB=N another vocabulary size than the published one for
#   the SmolLM2 shapes, in another WORK)
# GPT-2 124M and SmolLM2-360M are written in bf16 (half the disk; vkgrad keeps a frozen 16-bit
# folder in 16 bits and computes in f32, PyTorch widens it to f32): on lavapipe they decode and
# train LoRA adapters; training every weight keeps f32 masters, whose token tables (147 and
# 180 MiB) pass its 128 MiB maxStorageBufferRange, refused by name. smollm2-8l is
# SmolLM2-135M's shape cut to 8 layers, in f32: every-weight fine-tuning of the real shapes
# does not fit lavapipe's 2 GiB heap. A run that vkgrad refuses, or that stops on a NaN loss,
# shows "-" (its reason on stderr).
# Training rows are context 128 at batch 1: folders whose config.json says 128 positions (GPT-2:
# its own 128-row position table; SmolLM2: the same weights, max_position_embeddings 128), as
# `train --init` trains windows of the folder's context. Decoding runs the real config.json
# (sample's default window: 1024 for GPT-2; 2048, capped, for SmolLM2's 8192).
# Needs python3-torch and python3-numpy (Debian's /usr/bin/python3). Benchmark only.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-build}
rounds=${2:-3}
tokens=${3:-32}
steps=${4:-4}
models=${5:-gpt2-124m smollm2-135m smollm2-360m smollm2-8l}
whats=${6:-decode full lora}
threads=${THREADS:-2}
gpt="$build/apps/vkgrad-gpt"
py=/usr/bin/python3
if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
head -c 6000 /usr/share/common-licenses/Apache-2.0 > "$work/data.txt"
llama_shape() {
  case $1 in
    smollm2-135m) echo "--layers 30 --width 576 --heads 9 --kv-heads 3 --intermediate 1536" ;;
    smollm2-8l) echo "--layers 8 --width 576 --heads 9 --kv-heads 3 --intermediate 1536" ;;
    smollm2-360m) echo "--layers 32 --width 960 --heads 15 --kv-heads 5 --intermediate 2560 \
      --dtype bf16" ;;
  esac
}
make_folders() {  # $1: the model; writes $work/$1 and $work/$1-ctx128 unless there
  [ -f "$work/$1/model.safetensors" ] && [ -f "$work/$1-ctx128/config.json" ] && return 0
  case $1 in
    gpt2-124m)
      for ctx in 1024 128; do
        out="$work/$1"
        [ "$ctx" = 128 ] && out="$work/$1-ctx128"
        $py "$here/make_hf_gpt2.py" --out "$out" --layers 12 --heads 12 --width 768 \
          --context $ctx --vocab 50257 --std 0.02 --dtype bf16 > /dev/null
      done ;;
    smollm2-*)
      # shellcheck disable=SC2046
      $py "$here/make_hf_llama.py" --out "$work/$1" $(llama_shape "$1") --context 8192 \
        --rope-theta 100000 --rms-norm-eps 1e-5 --tied --vocab "${VOCAB:-49152}" --std 0.02 \
        > /dev/null
      mkdir -p "$work/$1-ctx128"
      for f in model.safetensors tokenizer.json vocab.json merges.txt; do
        ln -sf "$work/$1/$f" "$work/$1-ctx128/$f"
      done
      sed 's/"max_position_embeddings": 8192/"max_position_embeddings": 128/' \
        "$work/$1/config.json" > "$work/$1-ctx128/config.json" ;;
    *) echo "model: gpt2-124m, smollm2-135m or smollm2-360m" >&2; exit 2 ;;
  esac
}
median() {
  sort -n | awk 'NF {v[++n]=$1} END {print n == 0 ? "-" : (n % 2) ? v[(n+1)/2] : (v[n/2]+v[n/2+1])/2}'
}
vk_decode() {
  "$gpt" sample --checkpoint "$work/$1" --prompt "The licence" --tokens "$tokens" --top-k 1 \
    --json --timing 2>&1 >/dev/null | sed -n 's/.*median after the first: \([0-9.]*\).*/\1/p'
}
pt_decode() {
  $py "$here/time_hf_torch.py" decode --model "$work/$1" --prompt "The licence" --tokens "$tokens" \
    --threads "$threads" | $py -c 'import json,sys; print(round(json.load(sys.stdin)["ms_per_token"], 1))'
}
vk_train() {  # $1 model, $2 lora rank (0: every weight)
  "$gpt" train --init "$work/$1-ctx128" --data "$work/data.txt" --steps "$steps" --batch 1 \
    --lr 1e-4 --lora "$2" --log-every 1 --eval-every 0 --out "$work/vk_out" |
    sed -n 's/^step .* \([0-9.]*\) ms\/step.*/\1/p' | tail -n +2 | median
}
pt_train() {
  adapter=""
  if [ "$2" != 0 ]; then
    [ -d "$work/$1-lora" ] || $py "$here/hf_gpt_train.py" init-adapter --model "$work/$1-ctx128" \
      --out "$work/$1-lora" --rank "$2" --alpha 16
    adapter="--adapter $work/$1-lora"
  fi
  # shellcheck disable=SC2086
  $py "$here/time_hf_torch.py" train --model "$work/$1-ctx128" --data "$work/data.txt" \
    --steps "$steps" --batch 1 --threads "$threads" $adapter |
    $py -c 'import json,sys; print(round(json.load(sys.stdin)["ms_per_step"], 1))'
}
echo "device: $("$build/apps/vkgrad-info" 2>/dev/null | sed -n 's/^\* 0: //p'); torch threads" \
  "$threads; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg); $(date -u +%F)"
for model in $models; do
  make_folders "$model"
  for what in $whats; do
    : > "$work/vk.txt"
    : > "$work/pt.txt"
    line=""
    for r in $(seq "$rounds"); do
      case $what in
        decode) a=$(vk_decode "$model"); b=$(pt_decode "$model") ;;
        full) a=$(vk_train "$model" 0); b=$(pt_train "$model" 0) ;;
        lora) a=$(vk_train "$model" 8); b=$(pt_train "$model" 8) ;;
      esac
      echo "$a" >> "$work/vk.txt"
      echo "$b" >> "$work/pt.txt"
      line="$line  r$r ${a:--}/${b:--}"
    done
    unit="ms/token ($tokens tokens)"
    [ "$what" = decode ] || unit="ms/step (batch 1, context 128, $steps steps)"
    echo "$model $what $unit: vkgrad $(median < "$work/vk.txt") torch $(median < "$work/pt.txt")" \
      " (rounds vkgrad/torch:$line; load $(cut -d' ' -f1 /proc/loadavg))"
  done
done
