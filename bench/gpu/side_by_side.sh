#!/usr/bin/env bash
# On a lent GPU machine after `source bench/gpu/setup.sh`, with .ggml carried: vkgrad's
# kernels (Auto, as the models run them) at the shapes bench/gpu/ggml.sh gives ggml's Vulkan
# backend, then ggml.sh itself, one after the other on the same GPU. Logs to $1 (a folder).
set -uo pipefail
out=${1:?output folder}; B=$VKGRAD_BUILD/apps
cd "$(dirname "$0")/../.."
mkdir -p "$out"
log=$out/vkgrad-ops.txt; : > "$log"
run() {
  echo "\$ vkgrad-bench $*" >> "$log"
  timeout 60 "$B/vkgrad-bench" "$@" --warmup 20 --iters 50 2>&1 |
    grep -E "^(matmul|softmax|layernorm|attention|copy)|WRONG|rror" >> "$log"
}
run matmul --m 4096 --n 4096 --k 4096 --variant vector --sample
run matmul --m 4096 --n 4096 --k 4096 --variant coopmat --sample
run matmul --m 4096 --n 4096 --k 4096 --variant coopmat --inputs f16 --sample
for mnk in "768 384 128" "768 512 128" "768 128 512"; do
  set -- $mnk
  run matmul --m $1 --n $2 --k $3 --variant vector
  run matmul --m $1 --n $2 --k $3 --variant coopmat
done
for rc in "4096 4096" "768 128"; do
  set -- $rc
  run softmax --rows $1 --cols $2
  run layernorm --rows $1 --cols $2
done
for t in 64 1024 4096; do run attention --b 12 --h 4 --t $t --d 32 --causal --impl flash; done
run copy
cat "$log"
bash bench/gpu/ggml.sh "$out"
