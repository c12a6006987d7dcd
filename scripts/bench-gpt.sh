#!/usr/bin/env bash
# The 4-layer GPT's training step, vkgrad against PyTorch eager on the same machine, side by
# side: rounds alternate vkgrad-gpt train and bench/peers/step_torch.py (the same model and
# batch shape), and each round prints both ms/step and their ratio. BENCHMARKS.md reports
# the ratio from this command.
#   scripts/bench-gpt.sh [ROUNDS=3] [STEPS=100] [THREADS=2]
# vkgrad runs on the default device (VKGRAD_DEVICE picks another); PyTorch on the CPU with
# THREADS intra-op and BLAS threads (lavapipe uses every core). Needs Debian's python3-torch
# and, for a fair peer, libopenblas0-pthread (the peer says which BLAS it got); neither is a
# dependency of vkgrad.
# VKGRAD_BENCH_WIDE=1 also runs vkgrad in each round with LP_NATIVE_VECTOR_WIDTH=512
# (lavapipe's 512-bit vectors, subgroups of 16; README "Wider vectors on lavapipe") and prints
# that time and its ratio too.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_BUILD_DIR:-$root/build}"
rounds="${1:-3}" steps="${2:-100}" threads="${3:-2}"
[[ -x "$build/apps/vkgrad-gpt" ]] || { echo "bench-gpt.sh: build first ($build/apps/vkgrad-gpt)" >&2; exit 1; }
text="$(mktemp)" out="$(mktemp -d)"
trap 'rm -rf "$text" "$out"' EXIT
cat $(find /usr/share/common-licenses -type f | sort) > "$text"
export OMP_NUM_THREADS=$threads OPENBLAS_NUM_THREADS=$threads OMP_WAIT_POLICY=PASSIVE
echo "4 layers, 4 heads, width 128, context 64, batch 12; $steps steps a round"
wide="${VKGRAD_BENCH_WIDE:-0}"
printf '%5s  %16s  %17s  %s' round "vkgrad ms/step" "pytorch ms/step" "ratio (vkgrad / pytorch)"
[[ $wide == 1 ]] && printf '  %s  %s' "wide ms/step" "wide ratio"
printf '\n'
vkgrad_ms() {  # ms/step of one vkgrad-gpt run (round $1)
  "$build/apps/vkgrad-gpt" train --data "$text" --layers 4 --heads 4 --width 128 --context 64 \
    --batch 12 --steps "$steps" --lr 1e-3 --seed "$1" --eval-every $((steps + 1)) \
    --log-every "$steps" --out "$out/gpt" 2>&1 | sed -n 's/^done: .*, \([0-9.]*\) ms\/step.*/\1/p'
}
for ((r = 1; r <= rounds; ++r)); do
  v="$(vkgrad_ms "$r")"
  w=0
  [[ $wide == 1 ]] && w="$(LP_NATIVE_VECTOR_WIDTH=512 vkgrad_ms "$r")"
  t="$(/usr/bin/python3 "$root/bench/peers/step_torch.py" --device cpu --models gpt \
        --steps "$steps" --warmup 5 --threads "$threads" --json 2>"$out/torch.err" |
       /usr/bin/python3 -c 'import json,sys; print("%.1f" % json.loads(sys.stdin.read().strip().splitlines()[-1])["ms_per_step"])')"
  [[ $r == 1 ]] && grep "^BLAS\|^threads" "$out/torch.err" >&2
  /usr/bin/python3 -c "print('%5d  %16.1f  %17.1f  %.2f' % ($r, $v, $t, $v / $t) +
    ('  %12.1f  %10.2f' % ($w, $w / $t) if $wide == 1 else ''))"
done
