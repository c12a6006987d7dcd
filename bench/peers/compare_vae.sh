#!/usr/bin/env bash
# Side by side on one machine: vkgrad-vae train and bench/peers/vae_torch.py on the same
# configuration (784-400-20, bce, Adam 1e-3, batch 128), alternated for several rounds so
# that both see the same machine load, then training images/s for each and their ratio.
#   bench/peers/compare_vae.sh [ROUNDS=2] [EPOCHS=3] [THREADS=2]
# THREADS is PyTorch's intra-op thread count (lavapipe uses every core). Needs a built tree
# (scripts/test.sh or scripts/demo.sh) and the peer's packages (bench/peers/README.md).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${VKGRAD_BUILD_DIR:-$root/build}"
rounds="${1:-2}" epochs="${2:-3}" threads="${3:-2}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
field() { /usr/bin/python3 -c "import json,sys; d=json.loads(sys.stdin.read().strip().splitlines()[-1]); print($1)"; }
echo "round  vkgrad images/s  -ELBO    pytorch images/s  -ELBO    ratio (pytorch / vkgrad)"
for ((r = 1; r <= rounds; ++r)); do
  v="$("$build/apps/vkgrad-vae" train --epochs "$epochs" --out "$out/vkgrad" --json 2>/dev/null)"
  t="$(OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 "$root/bench/peers/vae_torch.py" --epochs "$epochs" \
        --threads "$threads" --drop-last --json 2>/dev/null)"
  vr="$(field "d['train_images_per_s']" <<<"$v")" ve="$(field "d['test']['neg_elbo']" <<<"$v")"
  tr="$(field "d['train_images_per_s']" <<<"$t")" te="$(field "d['epochs'][-1]['test_neg_elbo']" <<<"$t")"
  /usr/bin/python3 -c "print('%5d  %15.0f  %7.2f  %16.0f  %7.2f  %6.2f' % ($r, $vr, $ve, $tr, $te, $tr / $vr))"
done
