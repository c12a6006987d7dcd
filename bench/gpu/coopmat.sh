#!/usr/bin/env bash
# On a lent GPU machine (bench/gpu/README.md): the Coopmat matmul (tensor cores through
# VK_NV_cooperative_matrix) and the models with fp16 products against fp32 and PyTorch.
#   bash bench/gpu/coopmat.sh [tests] [matmul] [sweep] [shapes] [models] [scale] [torch]
# (default: all but scale)
# tests: the coopmat and fp16 tests; matmul: 4096³ and 8192³, vector against coopmat with
# f32 and f16 inputs; sweep: coopmat tilings at 4096³; shapes: the small GPT's and the
# GPT-2-small shape's products; models: the four demos and a GPT-2-small-shaped GPT, with VKGRAD_MATMUL
# fp32 then fp16; scale: the GPT-2-small-shaped GPT alone, trained, then one profiled step
# (--profile: GPU time by op), in both; torch: bench/peers/step_torch.py eager fp32 and autocast bf16 on the same
# shapes. Logs go to $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/gpu/setup.sh
out=${OUT:-/tmp/vkgrad-gpu}; mkdir -p "$out"
B=$VKGRAD_BUILD/apps
parts=${*:-tests matmul sweep shapes models torch}
gpt2s=(--data /tmp/licenses.txt --layers 12 --heads 12 --width 768 --context 1024 --batch 8 --lr 3e-4
       --warmup 5 --seed 1 --eval-every 0)
log=$out/coopmat.txt
say() { echo "\$ $*" | tee -a "$log"; }
bench() { say vkgrad-bench "$@"; timeout 60 "$B/vkgrad-bench" "$@" 2>&1 | grep -E "^(matmul|step|auto|[a-z]+ +(forward|dX|dW))|WRONG|rror" | tee -a "$log"; }

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv | tee -a "$log"
"$B/vkgrad-info" > "$out/info.txt" 2>&1; grep -A20 "coop. matrices" "$out/info.txt" | head -20 | tee -a "$log"

if [[ $parts == *tests* ]]; then
  say vkgrad_tests coopmat
  VKGRAD_VALIDATION=1 timeout 120 "$VKGRAD_BUILD/tests/vkgrad_tests" \
    --gtest_filter='MatmulCoopmat*:Half*' 2>&1 | tail -25 | tee -a "$log"
fi

if [[ $parts == *matmul* ]]; then
  for s in 4096 8192; do
    bench matmul --m $s --n $s --k $s --variant vector --sample --warmup 20 --iters 50
    bench matmul --m $s --n $s --k $s --variant coopmat --sample --warmup 20 --iters 50
    bench matmul --m $s --n $s --k $s --variant coopmat --inputs f16 --sample --warmup 20 --iters 50
  done
  for t in transA transB; do
    bench matmul --m 4096 --n 4096 --k 4096 --variant vector --$t --sample --warmup 20 --iters 50
    bench matmul --m 4096 --n 4096 --k 4096 --variant coopmat --$t --sample --warmup 20 --iters 50
    bench matmul --m 4096 --n 4096 --k 4096 --variant coopmat --inputs f16 --$t --sample --warmup 20 --iters 50
  done
fi

if [[ $parts == *sweep* ]]; then
  for t in 2x2x32x4x4 4x2x32x4x2 4x2x16x4x4 2x4x16x4x4 2x2x64x2x2 2x2x32x2x2 4x2x32x2x2; do
    bench matmul --m 4096 --n 4096 --k 4096 --variant coopmat --inputs f16 --tiling $t --sample --warmup 10 --iters 30
  done
fi

if [[ $parts == *shapes* ]]; then
  bench matmul --shapes gpt --variant vector --warmup 20 --iters 50
  bench matmul --shapes gpt --variant coopmat --warmup 20 --iters 50
  # GPT-2 small's products at batch 8 x context 1024 rows: qkv, proj, fc, out, forward.
  for nk in "2304 768" "768 768" "3072 768" "768 3072"; do
    set -- $nk
    bench matmul --m 8192 --n $1 --k $2 --variant vector --sample --warmup 20 --iters 50
    bench matmul --m 8192 --n $1 --k $2 --variant coopmat --sample --warmup 20 --iters 50
  done
fi

if [[ $parts == *models* ]]; then
  for precision in fp32 fp16; do
    export VKGRAD_MATMUL=$precision
    app() { say "VKGRAD_MATMUL=$precision $*"; timeout 120 "$@" 2>&1 | grep -E "^done|ms/step|rror" | tail -3 | tee -a "$log"; }
    app "$B/vkgrad-gpt" train --data /tmp/licenses.txt --layers 4 --heads 4 --width 128 --context 64 \
      --batch 12 --steps 500 --lr 1e-3 --warmup 100 --seed 1 --eval-every 1000 --log-every 500 --out /tmp/gpt-$precision
    app "$B/vkgrad-vit" train --epochs 1 --out /tmp/vit-$precision
    app "$B/vkgrad-vae" train --epochs 2 --out /tmp/vae-$precision
    app "$B/vkgrad-gpt" train "${gpt2s[@]}" --steps 30 --log-every 10 --out /tmp/gpt2s-$precision
  done
  unset VKGRAD_MATMUL
fi

if [[ $parts == *scale* ]]; then
  for precision in fp32 fp16; do
    say "VKGRAD_MATMUL=$precision vkgrad-gpt train (GPT-2 small's shape) --steps 20, then --steps 3 --profile"
    VKGRAD_MATMUL=$precision timeout 120 "$B/vkgrad-gpt" train "${gpt2s[@]}" --steps 20 --log-every 10 \
      --out /tmp/gpt2s-$precision 2>&1 | grep -E "^done|^step|rror" | tee -a "$log"
    VKGRAD_MATMUL=$precision timeout 120 "$B/vkgrad-gpt" train "${gpt2s[@]}" --steps 3 --log-every 3 --profile \
      --out /tmp/gpt2sp-$precision 2>&1 | sed -n '/GPU time of the last/,$p' | tee -a "$log"
  done
fi

if [[ $parts == *torch* ]]; then
  for ac in "" "--autocast bf16"; do
    say step_torch.py $ac
    timeout 150 python3 bench/peers/step_torch.py --device cuda --models gpt,vit,vae $ac 2>&1 | tee -a "$log"
    timeout 150 python3 bench/peers/step_torch.py --device cuda --models gpt --gpt 12,12,768,1024,8 \
      --steps 30 --warmup 5 $ac 2>&1 | tee -a "$log"
  done
fi
