#!/usr/bin/env bash
# Two GPTs given the same wall-clock budget on the fortunes corpus (Debian's `fortunes`,
# /usr/share/games/fortunes): the `mid` preset (6 layers, width 384, context 256, 10.8 M
# parameters) and the demo model (the app's defaults: 2 layers, width 64, context 64), run
# at the same time, each pinned to its own core with one lavapipe thread, so neither gets
# more of the machine. Step counts are set from each model's measured rate on one core so
# that both runs last about the budget (20 minutes by default); the logs give the validation
# loss against elapsed time.
#   bench/gpt_budget.sh OUT [MID_STEPS DEMO_STEPS]
set -euo pipefail
build="${VKGRAD_BUILD:-build}"
out="$1" mid_steps="${2:-210}" demo_steps="${3:-28000}"
data=/usr/share/games/fortunes
[[ -d $data ]] || { echo "needs Debian's fortunes: apt-get install -y fortunes" >&2; exit 2; }
mkdir -p "$out"
export LP_NUM_THREADS=1
taskset -c 0 "$build/apps/vkgrad-gpt" train --data "$data" --preset mid --steps "$mid_steps" \
  --eval-every 30 --log-every 10 --out "$out/mid" --json > "$out/mid.log" 2>&1 &
taskset -c 1 "$build/apps/vkgrad-gpt" train --data "$data" --steps "$demo_steps" \
  --eval-every 2000 --log-every 1000 --out "$out/demo" --json > "$out/demo.log" 2>&1 &
wait
grep -E "val|^done" "$out/mid.log" "$out/demo.log"
