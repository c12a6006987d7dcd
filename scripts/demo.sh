#!/usr/bin/env bash
# Sets up (packages, build) and runs a demo:
#   scripts/demo.sh [FILE]   the device list, then a small byte-level GPT trained on a text
#                            file (default: the GPL-3 text that every Debian system ships in
#                            /usr/share/common-licenses), then a sample;
#   scripts/demo.sh vit      a vision transformer trained on Fashion-MNIST for two epochs
#                            (about two minutes on two CPU cores), its test accuracy, and
#                            where its pictures are;
#   scripts/demo.sh vae      a variational autoencoder with a 2-D latent space trained on
#                            Fashion-MNIST for three epochs (about a minute), its test loss,
#                            and where its pictures are (latent space, manifold, samples);
#   scripts/demo.sh gnn      a GCN and a GAT trained on Zachary's karate club from one labelled
#                            member per faction (seconds), and where the drawn graphs are.
set -euo pipefail
# Only the programs the demo runs are built (the test suite is most of a full build).
case "${1:-}" in
  vit | vae | gnn) export VKGRAD_BUILD_TARGETS="vkgrad-info vkgrad-$1" ;;
  *) export VKGRAD_BUILD_TARGETS="vkgrad-info vkgrad-gpt" ;;
esac
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

"$VKGRAD_BUILD/apps/vkgrad-info"
echo
if [[ "${1:-}" == vit ]]; then
  out="${VKGRAD_DEMO_OUT:-$VKGRAD_BUILD/vit-demo}"
  "$VKGRAD_BUILD/apps/vkgrad-vit" train --out "$out" --epochs 2 --seed 1
  echo
  echo "pictures: $out/curves.png, $out/confusion.png, $out/predictions.png"
  exit 0
fi

if [[ "${1:-}" == vae ]]; then
  out="${VKGRAD_DEMO_OUT:-$VKGRAD_BUILD/vae-demo}"
  "$VKGRAD_BUILD/apps/vkgrad-vae" train --out "$out" --latent 2 --epochs 3 --seed 1
  echo
  echo "pictures: $out/latent.png, $out/manifold.png, $out/samples.png,"
  echo "          $out/reconstructions.png, $out/curves.png"
  exit 0
fi

if [[ "${1:-}" == gnn ]]; then
  out="${VKGRAD_DEMO_OUT:-$VKGRAD_BUILD/gnn-demo}"
  for model in gcn gat; do
    "$VKGRAD_BUILD/apps/vkgrad-gnn" train --data karate --model "$model" --seed 1 \
      --log-every 50 --eval-every 50 --out "$out/$model"
  done
  echo
  echo "pictures: $out/gcn/graph.png, $out/gat/graph.png (and curves.png beside each)"
  exit 0
fi

data="${1:-/usr/share/common-licenses/GPL-3}"
out="${VKGRAD_DEMO_OUT:-$VKGRAD_BUILD/gpt-demo}"
"$VKGRAD_BUILD/apps/vkgrad-gpt" train --data "$data" --out "$out" \
  --layers 2 --heads 4 --width 64 --context 64 --batch 16 --steps 600 --lr 3e-3 --seed 1
echo
echo "sample (temperature 0.8, top-k 20):"
"$VKGRAD_BUILD/apps/vkgrad-gpt" sample --checkpoint "$out" --prompt "The " --tokens 300 \
  --temperature 0.8 --top-k 20 --seed 1
