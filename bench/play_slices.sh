#!/usr/bin/env bash
# vkgrad-play with a model whose training step is longer than a frame (hidden width 512),
# whole steps against steps in pieces of a GPU-time budget (--slice-ms), rounds alternating
# the two. Prints each run's summary: mean and slowest frame, steps/s.
#   bench/play_slices.sh [ROUNDS] [FRAMES] [SLICE_MS]
set -euo pipefail
build="${VKGRAD_BUILD:-build}"
rounds="${1:-2}" frames="${2:-300}" slice="${3:-5}"
for ((r = 1; r <= rounds; ++r)); do
  for ms in 0 "$slice"; do
    printf 'round %d, --slice-ms %-3s: ' "$r" "$ms"
    xvfb-run -a "$build/apps/vkgrad-play" --frames "$frames" --hidden 512 --grid 48 \
      --slice-ms "$ms" | tail -1
  done
done
