#!/usr/bin/env bash
# On a lent GPU machine (bench/gpu/README.md): the device, the whole test suite with validation,
# every variant of the benchmarked ops and the demo apps' training speed. Logs go to $OUT.
#   bash bench/gpu/survey.sh [suite] [variants] [apps] [matmul] [compare]   (default: the first three)
# The suite leaves out Consumer.* (builds vkgrad from source with Debian's toolchain) and
# PlayApp.* (needs an X server; the machine has none).
set -uo pipefail
cd "$(dirname "$0")/../.."
source bench/gpu/setup.sh
out=${OUT:-/tmp/vkgrad-gpu}; mkdir -p "$out"
B=$VKGRAD_BUILD/apps
parts=${*:-suite variants apps}
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.sm,memory.total --format=csv | tee "$out/device.txt"
"$B/vkgrad-info" >> "$out/device.txt" 2>&1; head -20 "$out/device.txt"

if [[ $parts == *suite* ]]; then
  (cd "$VKGRAD_BUILD" && time timeout 240 ctest -j 16 -E "Consumer|PlayApp" --timeout 150 --output-on-failure) \
    > "$out/ctest.txt" 2>&1
  grep -E "tests passed|Failed|\*\*\*|real" "$out/ctest.txt" | tail -40
fi

if [[ $parts == *variants* ]]; then
  v=$out/variants.txt; : > "$v"
  run() { echo "\$ vkgrad-bench $*" >> "$v"; timeout 60 "$B/vkgrad-bench" "$@" --iters 20 --warmup 3 >> "$v" 2>&1; }
  for s in 4096 2048 1024; do run matmul --m $s --n $s --k $s --variant all; done
  for mnk in "768 128 128" "768 512 128" "768 128 512" "128 128 768" "512 128 768" "768 86 128"; do
    set -- $mnk; run matmul --m $1 --n $2 --k $3 --variant all
  done
  run matmul --m 768 --n 128 --k 128 --transA --variant all
  run matmul --m 768 --n 128 --k 128 --transB --variant all
  for rc in "4096 4096" "768 128" "768 86" "65536 64" "512 8192"; do
    set -- $rc; run softmax --rows $1 --cols $2 --variant all; run layernorm --rows $1 --cols $2 --variant all
  done
  for t in 64 1024 4096; do
    run attention --b 12 --h 4 --t $t --d 32 --causal --variant all
    run attention --b 12 --h 4 --t $t --d 32 --causal --backward --variant all
  done
  run copy; run spmm --nodes 100000 --edges 2000000 --features 64
  grep -E "^(matmul|softmax|layernorm|attention|copy|spmm|\\$)" "$v" | cut -c1-110
fi

if [[ $parts == *apps* ]]; then
  a=$out/apps.txt; : > "$a"
  wc -c /tmp/licenses.txt >> "$a"
  app() { echo "\$ $*" >> "$a"; (time timeout 240 "$@") >> "$a" 2>&1; }
  app "$B/vkgrad-gpt" train --data /tmp/licenses.txt --layers 4 --heads 4 --width 128 --context 64 \
      --batch 12 --steps 500 --lr 1e-3 --warmup 100 --seed 1 --eval-every 1000 --log-every 100 --out /tmp/gpt
  app "$B/vkgrad-vit" train --epochs 1 --out /tmp/vit --json
  app "$B/vkgrad-vae" train --epochs 2 --out /tmp/vae --json
  app "$B/vkgrad-gnn" train --data sbm --nodes 100000 --communities 10 --degree-in 16 --degree-out 4 \
      --features 32 --model gcn --hidden 64 --labelled 20 --epochs 10 --log-every 10 --out /tmp/gnn --json
  app "$B/vkgrad-gpt" train --data /tmp/licenses.txt --layers 4 --heads 4 --width 128 --context 64 \
      --batch 12 --steps 20 --seed 1 --profile --out /tmp/gptp
  grep -E "^\\$|done|ms/step|images/s|ms_per|real|rror" "$a" | cut -c1-200
  cp /tmp/gpt/curves.png "$out/gpt-curves.png" 2>/dev/null
fi

if [[ $parts == *matmul* ]]; then
  timeout 60 "$B/vkgrad-bench" matmul --m 4096 --n 4096 --k 4096 --variant all --sample \
    --warmup 20 --iters 50 > "$out/matmul.txt" 2>&1
  cat "$out/matmul.txt"
fi

if [[ $parts == *compare* ]]; then
  mkdir -p "$out/compare"
  timeout 240 bash bench/gpu/compare.sh "$out/compare" 2>&1 | tee "$out/compare.txt"
fi
