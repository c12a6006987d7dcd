#!/usr/bin/env bash
# On a lent GPU machine (bench/gpu/README.md): the weight-gradient products of the demos with
# and without split-K (ops::matmulSplitK), and the per-op GPU time of one training step of
# each demo (--profile). Logs to $1. VKGRAD_PROFILE_PRODUCTS=0 leaves out the products.
#   bash bench/gpu/profile.sh OUT.txt
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/gpu/setup.sh
o=${1:?output file}; : > "$o"; B=$VKGRAD_BUILD/apps
p() { echo "\$ ${*#"$B/"}" >> "$o"; timeout 100 "$@" 2>&1 | grep -v -E "^epoch|ETA|^step |^vkgrad-bench" >> "$o"; }
# dW = Xᵀ·dY: the GCN's (features 32, hidden 64, 10 classes over 100,000 nodes), the ViT's
# (width 64, MLP 128, qkv 192 over 128 images x 17 tokens), the GPT's (width 128, MLP 512,
# qkv 384 over 12 x 64 tokens), and the GPT's dX over the MLP's 512.
[[ ${VKGRAD_PROFILE_PRODUCTS:-1} == 1 ]] &&
for mnk in "32 64 100000" "64 10 100000" "64 64 2176" "64 192 2176" "128 64 2176" \
           "128 384 768" "128 512 768" "512 128 768" "128 128 768" "768 128 512 --transB"; do
  set -- $mnk
  for s in off auto; do
    p "$B/vkgrad-bench" matmul --m $1 --n $2 --k $3 ${4:---transA} --variant vector --split $s \
      --warmup 20 --iters 50
  done
done
p "$B/vkgrad-gnn" train --data sbm --nodes 100000 --communities 10 --degree-in 16 --degree-out 4 \
  --features 32 --model gcn --hidden 64 --labelled 20 --epochs 5 --log-every 5 --out /tmp/gnnp --profile
p "$B/vkgrad-vit" train --epochs 1 --profile --out /tmp/vitp
p "$B/vkgrad-gpt" train --data /tmp/licenses.txt --layers 4 --heads 4 --width 128 --context 64 \
  --batch 12 --steps 200 --seed 1 --eval-every 1000 --log-every 100 --profile --out /tmp/gptp
p "$B/vkgrad-vae" train --epochs 1 --profile --out /tmp/vaep
grep -E "^\\$|^matmul|^done|^op |matmulBackward|^total" "$o"
