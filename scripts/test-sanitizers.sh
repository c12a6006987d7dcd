#!/usr/bin/env bash
# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer: builds into
# build-asan/ (RelWithDebInfo, -DVKGRAD_SANITIZE=address,undefined; every report aborts its
# test) and runs every test but the consumer build. Leak detection is off: Mesa's lavapipe
# leaks into modules it unloads, which cannot be told apart from ours; the fuzzers (fuzz/run.sh)
# check the readers for leaks. README, "Reliability".
#   scripts/test-sanitizers.sh        (after scripts/setup.sh's packages are installed)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_ASAN_BUILD_DIR:-$root/build-asan}"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DVKGRAD_SANITIZE=address,undefined >/dev/null
cmake --build "$build" -j"$(nproc)"
ASAN_OPTIONS=detect_leaks=0 ctest --test-dir "$build" -E Consumer --output-on-failure \
  --no-tests=error -j"$(nproc)"
