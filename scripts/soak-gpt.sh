#!/usr/bin/env bash
# Soak: a long GPT training run that checkpoints as it goes, with host RSS and the allocator's
# device bytes in use sampled every INTERVAL steps (vkgrad-gpt train --log-memory). After the
# warm-up (the first sample, taken before the first checkpoint, which allocates its buffers)
# both must stay flat: the script fails when either grows by more than 1 MiB (host) or by any
# byte (device) from the second sample to the last.
#   scripts/soak-gpt.sh [STEPS=10000] [INTERVAL=500]
# A small model (2 layers, width 64, context 64, batch 8), so the run takes minutes on
# lavapipe; VKGRAD_DEVICE picks another device. Not a unit test: README, "Reliability".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_BUILD_DIR:-$root/build}"
steps="${1:-10000}" interval="${2:-500}"
[[ -x "$build/apps/vkgrad-gpt" ]] || { echo "soak-gpt.sh: build first ($build/apps/vkgrad-gpt)" >&2; exit 1; }
text="$(mktemp)" out="$(mktemp -d)"
trap 'rm -rf "$text" "$out"' EXIT
cat $(find /usr/share/common-licenses -type f | sort) > "$text"
echo "soak: $steps steps, a sample and a checkpoint every $interval"
start=$(date +%s)
"$build/apps/vkgrad-gpt" train --data "$text" --out "$out/gpt" --layers 2 --heads 4 --width 64 \
  --context 64 --batch 8 --steps "$steps" --schedule constant --lr 1e-3 --eval-every "$interval" \
  --log-every "$interval" --save-every "$interval" --log-memory 2>&1 |
  tee "$out/log" | grep --line-buffered '^step\|^done\|^device'
echo "wall time: $(( $(date +%s) - start )) s"
# "step    500/10000  loss ...  host RSS 123.45 MiB  device 2.34 MiB"
awk '/^step .*host RSS/ {
       for (i = 1; i <= NF; ++i) { if ($i == "RSS") host = $(i + 1); if ($i == "device") dev = $(i + 1) }
       n += 1
       if (n == 2) { host0 = host; dev0 = dev }
       hostN = host; devN = dev
       if (host > host_max) host_max = host
     }
     END {
       if (n < 3) { print "soak: fewer than three samples"; exit 1 }
       printf "samples %d; after warm-up host RSS %.2f -> %.2f MiB (max %.2f), device %.2f -> %.2f MiB\n",
              n, host0, hostN, host_max, dev0, devN
       if (hostN - host0 > 1.0 || devN != dev0) { print "soak: memory grew after warm-up"; exit 1 }
       print "soak: flat after warm-up"
     }' "$out/log"
