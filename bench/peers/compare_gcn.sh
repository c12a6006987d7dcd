#!/usr/bin/env bash
# Side by side on one machine: a 2-layer GCN (hidden 64) training epoch on a stochastic block
# model, vkgrad-gnn against bench/peers/gcn_torch.py, alternated for several rounds.
#   bench/peers/compare_gcn.sh [NODES=100000] [ROUNDS=2] [EPOCHS=10]
# About 20 neighbours per node (16 inside its community of 10, 4 outside), 32 features.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${VKGRAD_BUILD_DIR:-$root/build}"
nodes="${1:-100000}" rounds="${2:-2}" epochs="${3:-10}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
shape=(--nodes "$nodes" --communities 10 --degree-in 16 --degree-out 4 --features 32)
field() { /usr/bin/python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print($1)"; }
echo "round  edges     vkgrad ms/epoch  MiB (device)  pytorch ms/epoch  MiB (RSS)  ratio (vkgrad / pytorch)"
for ((r = 1; r <= rounds; ++r)); do
  v="$("$build/apps/vkgrad-gnn" train --data sbm "${shape[@]}" --model gcn --hidden 64 \
        --labelled 20 --epochs "$epochs" --log-every "$epochs" --out "$out/v" --json 2>/dev/null)"
  t="$(/usr/bin/python3 "$root/bench/peers/gcn_torch.py" "${shape[@]}" --hidden 64 --labelled 20 \
        --epochs "$epochs" --json 2>/dev/null)"
  /usr/bin/python3 -c "print('%5d  %8d  %15.1f  %12.1f  %16.1f  %9.0f  %6.2f' % ($r, $(field "d['edges']" <<<"$v"), \
    $(field "d['ms_per_step']" <<<"$v"), $(field "d['peak_device_bytes'] / 2**20" <<<"$v"), \
    $(field "d['ms_per_epoch_median']" <<<"$t"), $(field "d['peak_rss_mib']" <<<"$t"), \
    $(field "d['ms_per_step']" <<<"$v") / $(field "d['ms_per_epoch_median']" <<<"$t")))"
done
