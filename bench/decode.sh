#!/usr/bin/env bash
# Milliseconds per generated token of `vkgrad-gpt sample` with the key/value cache (on) and
# with the whole window run again for every token (off), at sequence positions 1, context/2
# and context: greedy decoding from a one-byte prompt up to the context, rounds alternating
# the two so that both see the same machine load. The model is the `mid` preset (6 layers,
# width 384, context 256) after two training steps on Debian's fortunes: the weights do not
# change the cost, only the shapes do.
#   bench/decode.sh [ROUNDS] [CHECKPOINT_DIR]
set -euo pipefail
build="${VKGRAD_BUILD:-build}"
rounds="${1:-3}" ck="${2:-/tmp/vkgrad-decode-mid}"
data=/usr/share/games/fortunes
if [[ ! -f $ck/config.json ]]; then
  [[ -d $data ]] || { echo "needs Debian's fortunes: apt-get install -y fortunes" >&2; exit 2; }
  "$build/apps/vkgrad-gpt" train --data "$data" --preset mid --steps 2 --out "$ck" > /dev/null
fi
for ((r = 1; r <= rounds; ++r)); do
  for cache in on off; do
    printf 'round %d, kv-cache %-3s: ' "$r" "$cache"
    "$build/apps/vkgrad-gpt" sample --checkpoint "$ck" --prompt A --tokens 256 --top-k 1 \
      --kv-cache "$cache" --timing 2>&1 > /dev/null | tail -1
  done
done
