#!/usr/bin/env bash
# Learning quality and memory of one model trained at the same settings and seed in fp32,
# bf16 and fp16 (--precision), run one after another on the same device. Each run's --json
# line goes to OUT/<precision>.json and its checkpoint to OUT/<precision>/; the curves of
# the three runs are drawn in one picture per curve (vkgrad-curves).
#
#   bench/precision.sh gpt OUT [extra train options...]
#   bench/precision.sh vit|vae|gnn OUT [extra train options...]
#
# gpt trains the demo model (scripts/demo.sh) on /usr/share/common-licenses/GPL-3; the
# others train at their defaults plus the extra options (e.g. --epochs 2).
set -euo pipefail
build="${VKGRAD_BUILD:-build}"
model="$1" out="$2"
shift 2
mkdir -p "$out"
case "$model" in
  gpt) args=(train --data /usr/share/common-licenses/GPL-3 --layers 2 --heads 4 --width 64
             --context 64 --batch 16 --steps 600 --lr 3e-3 --seed 1)
       curves=("train loss" "validation") unit=step ;;
  vit) args=(train --seed 1); curves=("train loss" "test error %") unit=epoch ;;
  vae) args=(train --seed 1); curves=("train loss" "test reconstruction") unit=epoch ;;
  gnn) args=(train --data karate --model gcn --seed 1 --log-every 50 --eval-every 50)
       curves=("train loss") unit=epoch ;;
  *) echo "usage: $0 gpt|vit|vae|gnn OUT [options]" >&2; exit 2 ;;
esac
for precision in fp32 bf16 fp16; do
  echo "== $model $precision" >&2
  "$build/apps/vkgrad-$model" "${args[@]}" "$@" --precision "$precision" \
    --out "$out/$precision" --json | tee "$out/$precision.log" | tail -1 > "$out/$precision.json"
done
for curve in "${curves[@]}"; do
  "$build/apps/vkgrad-curves" --curve "$curve" --out "$out/${curve// /-}.png" \
    --title "vkgrad-$model: $curve, fp32 / bf16 / fp16" --x-label "$unit" \
    fp32="$out/fp32" bf16="$out/bf16" fp16="$out/fp16" || true
done
