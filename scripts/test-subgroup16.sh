#!/usr/bin/env bash
# The whole suite again on lavapipe with subgroups of 16 lanes instead of 8
# (LP_NATIVE_VECTOR_WIDTH=512: llvmpipe's 512-bit vectors), so that every kernel using
# subgroup operations is run at two sizes. Reuses the build of scripts/test.sh (build/, or
# $VKGRAD_BUILD) and skips the consumer builds, which test packaging, not kernels. Fails if
# the device does not report 16 lanes.
#   scripts/test-subgroup16.sh        (after scripts/test.sh)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_BUILD:-$root/build}"
export LP_NATIVE_VECTOR_WIDTH=512
if ! "$build/apps/vkgrad-info" | grep -q "subgroups *16 lanes"; then
  echo "test-subgroup16.sh: the device does not report 16-lane subgroups:" >&2
  "$build/apps/vkgrad-info" >&2
  exit 1
fi
ctest --test-dir "$build" -E Consumer --output-on-failure --no-tests=error -j2
