#!/usr/bin/env bash
# On a lent GPU machine (bench/gpu/README.md): the models in fp32, bf16 and fp16 activations
# (`--precision`), GPT-2 small (`--preset gpt2-small`) at batch 8 and 1 with a profiled step,
# and PyTorch eager fp32 / autocast bf16 on the same shapes in the same call.
#   bash bench/gpu/precision.sh [tests] [matmul] [gpt2s] [profile16] [torch] [demos]
#   (default: gpt2s torch demos)
# tests: the 16-bit and coopmat tests (validation on); matmul: GPT-2 small's MLP products at
# batch 8 x 1024 rows with every format of A, B and C; profile16: one profiled bf16 and fp16
# GPT-2 small step.
# Logs go to $OUT/precision.txt.
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/gpu/setup.sh
out=${OUT:-/tmp/vkgrad-gpu}; mkdir -p "$out"
B=$VKGRAD_BUILD/apps
parts=${*:-gpt2s torch demos}
log=$out/precision.txt
say() { echo "\$ $*" | tee -a "$log"; }
app() { say "$*"; timeout 120 "$@" 2>&1 | grep -E "^done|^final|^test|rror|refus" | tail -4 | tee -a "$log"; }
gpt2s=(--preset gpt2-small --data /tmp/licenses.txt --lr 3e-4 --warmup 5 --seed 1 --eval-every 0)

bench() { say vkgrad-bench "$@"; timeout 60 "$B/vkgrad-bench" "$@" 2>&1 | grep -E "^matmul|WRONG|rror" | tee -a "$log"; }

if [[ $parts == *tests* ]]; then
  say vkgrad_tests 16-bit and coopmat
  timeout 150 "$VKGRAD_BUILD/tests/vkgrad_tests" --gtest_brief=1 \
    --gtest_filter='*SixteenBit*:MatmulCoopmat*:AttentionTest.*' 2>&1 | tail -15 | tee -a "$log"
fi

if [[ $parts == *matmul* ]]; then
  for mnk in "8192 3072 768" "8192 768 3072" "8192 768 767"; do
    set -- $mnk
    for f in f32 bf16 f16; do
      bench matmul --m $1 --n $2 --k $3 --inputs $f --output $f --variant vector --sample --warmup 10 --iters 20
    done
    bench matmul --m $1 --n $2 --k $3 --inputs f16 --output f16 --variant coopmat --sample --warmup 10 --iters 20
  done
  bench matmul --m 8192 --n 3072 --k 768 --inputs bf16 --output bf16 --variant vector --tiling 16x16x16x4x4 --sample --warmup 10 --iters 20
fi
if [[ $parts == *gpt2s* ]]; then
  for p in fp32 bf16 fp16; do
    app "$B/vkgrad-gpt" train "${gpt2s[@]}" --batch 8 --steps 20 --log-every 10 --precision $p --out /tmp/g8-$p
  done
  app "$B/vkgrad-gpt" train "${gpt2s[@]}" --batch 1 --steps 20 --log-every 10 --precision fp32 --out /tmp/g1-fp32
  app "$B/vkgrad-gpt" train "${gpt2s[@]}" --batch 1 --steps 20 --log-every 10 --precision fp16 --out /tmp/g1-fp16
  for p in fp32 fp16; do
    say "gpt2-small batch 8 --precision $p --steps 3 --profile"
    timeout 120 "$B/vkgrad-gpt" train "${gpt2s[@]}" --batch 8 --steps 3 --log-every 3 --precision $p \
      --profile --out /tmp/gp-$p 2>&1 | sed -n '/GPU time of the last/,$p' | head -30 | tee -a "$log"
  done
fi

if [[ $parts == *profile16* ]]; then
  for p in bf16 fp16; do
    say "gpt2-small batch 8 --precision $p --steps 6 --profile"
    timeout 120 "$B/vkgrad-gpt" train "${gpt2s[@]}" --batch 8 --steps 6 --log-every 6 --precision $p \
      --profile --out /tmp/gq-$p > /tmp/gq-$p.txt 2>&1
    grep -E "^done|rror" /tmp/gq-$p.txt | tee -a "$log"
    sed -n '/GPU time of the last/,/^total/p' /tmp/gq-$p.txt | head -12 | tee -a "$log"
  done
fi

if [[ $parts == *torch* ]]; then
  for ac in "" "--autocast bf16"; do
    for b in 8 1; do
      say step_torch.py gpt 12,12,768,1024,$b $ac
      timeout 100 python3 bench/peers/step_torch.py --device cuda --models gpt --gpt 12,12,768,1024,$b \
        --steps 20 --warmup 5 $ac 2>&1 | tail -2 | tee -a "$log"
    done
  done
  say step_torch.py gpt,vit,vae; timeout 100 python3 bench/peers/step_torch.py --device cuda \
    --models gpt,vit,vae 2>&1 | tail -4 | tee -a "$log"
fi

if [[ $parts == *demos* ]]; then
  for p in fp32 bf16 fp16; do
    app "$B/vkgrad-gpt" train --data /tmp/licenses.txt --layers 4 --heads 4 --width 128 --context 64 \
      --batch 12 --steps 500 --lr 1e-3 --warmup 100 --seed 1 --eval-every 1000 --log-every 500 \
      --precision $p --out /tmp/gpt-$p
    app "$B/vkgrad-vit" train --epochs 1 --precision $p --out /tmp/vit-$p
    app "$B/vkgrad-vae" train --epochs 2 --precision $p --out /tmp/vae-$p
  done
fi
