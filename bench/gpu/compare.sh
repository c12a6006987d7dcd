#!/usr/bin/env bash
# On a lent GPU machine after bench/gpu/setup.sh: the four demo apps' training speed and the
# same models' steps in PyTorch eager CUDA (bench/peers/step_torch.py), one after the other.
# Logs to $1 (a folder); a summary last.
set -uo pipefail
out=${1:?output folder}; B=$VKGRAD_BUILD/apps
cd "$(dirname "$0")/../.."
for round in 1 2; do
  { "$B/vkgrad-gpt" train --data /tmp/licenses.txt --layers 4 --heads 4 --width 128 --context 64 \
      --batch 12 --steps 1000 --lr 1e-3 --warmup 100 --seed 1 --eval-every 2000 --log-every 500 \
      --out /tmp/gpt
    "$B/vkgrad-vit" train --epochs 2 --out /tmp/vit
    "$B/vkgrad-vae" train --epochs 3 --out /tmp/vae
    "$B/vkgrad-gnn" train --data sbm --nodes 100000 --communities 10 --degree-in 16 --degree-out 4 \
      --features 32 --model gcn --hidden 64 --labelled 20 --epochs 50 --log-every 50 --out /tmp/gnn
  } > "$out/vkgrad-$round.txt" 2>&1
  python3 bench/peers/step_torch.py --device cuda --json > "$out/torch-$round.txt" 2>&1
done
grep -h "^done" "$out"/vkgrad-*.txt
grep -h "ms/step" "$out"/torch-*.txt
