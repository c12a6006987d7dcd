#!/usr/bin/env bash
# The karate club benchmark of BENCHMARKS.md: each model trained from one labelled member per
# faction (nodes 0 and 33) for seeds 1..SEEDS; prints the test accuracy on the other 32
# members per seed, and the mean and the minimum per model.
#   bench/gnn_karate.sh [SEEDS=10] [EPOCHS=200]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_BUILD_DIR:-$root/build}"
seeds="${1:-10}" epochs="${2:-200}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
for model in gcn gat conv; do
  accs=()
  for ((s = 1; s <= seeds; ++s)); do
    line="$("$build/apps/vkgrad-gnn" train --model "$model" --data karate --epochs "$epochs" \
            --seed "$s" --out "$out/$model" --json 2>/dev/null | tail -1)"
    accs+=("$(/usr/bin/python3 -c "import json,sys; print(json.loads(sys.argv[1])['accuracy'])" "$line")")
  done
  /usr/bin/python3 - "$model" "${accs[@]}" <<'PY'
import sys
model, accs = sys.argv[1], [float(a) for a in sys.argv[2:]]
print("%-5s seeds %d: mean %.2f %%, min %.2f %%  (%s)" % (model, len(accs), 100 * sum(accs) / len(accs),
      100 * min(accs), " ".join("%.1f" % (100 * a) for a in accs)))
PY
done
