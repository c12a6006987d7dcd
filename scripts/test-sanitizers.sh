#!/usr/bin/env bash
# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer, built with clang
# (Debian's clang 14, warnings as errors) and run on lavapipe with 16-lane subgroups: one
# build and one run that check three things the plain suite (scripts/test.sh: GCC, 8 lanes)
# does not: clang's warnings, memory and undefined-behaviour errors (every report aborts its
# test), and every subgroup kernel at a second subgroup size (LP_NATIVE_VECTOR_WIDTH=512:
# llvmpipe's 512-bit vectors). Builds into build-asan/ (-O1, line tables only: what the
# sanitizers need, and half the compile time of -O2 -g), without the header-by-header layering
# check (tests/vulkan_free: 135 objects, compiled in scripts/test.sh's build), and runs every
# test but the consumer builds. Leak detection is off: Mesa's lavapipe leaks into modules it unloads, which cannot
# be told apart from ours; the fuzzers (fuzz/run.sh) check the readers for leaks. README,
# "Reliability". Installs what setup.sh installs, and clang, where missing.
#   scripts/test-sanitizers.sh
#   VKGRAD_ASAN_LANES=8 scripts/test-sanitizers.sh     (lavapipe's default 8 lanes instead)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_ASAN_BUILD_DIR:-$root/build-asan}"
lanes="${VKGRAD_ASAN_LANES:-16}"
# shellcheck source=scripts/setup.sh
VKGRAD_EXTRA_PACKAGES=clang VKGRAD_SETUP_PACKAGES_ONLY=1 source "$root/scripts/setup.sh"
command -v clang++ >/dev/null || { echo "test-sanitizers: needs clang (apt-get install clang)" >&2; exit 2; }
flags="-O1 -gline-tables-only -DNDEBUG"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVKGRAD_WERROR=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="$flags" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="$flags" \
  -DVKGRAD_SANITIZE=address,undefined -DVKGRAD_CHECK_LAYERS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)"
case "$lanes" in
  16) export LP_NATIVE_VECTOR_WIDTH=512 ;;
  8) export LP_NATIVE_VECTOR_WIDTH=256 ;;
  *) echo "test-sanitizers: VKGRAD_ASAN_LANES must be 8 or 16" >&2; exit 2 ;;
esac
export ASAN_OPTIONS=detect_leaks=0
if ! "$build/apps/vkgrad-info" | grep -q "subgroups *$lanes lanes"; then
  echo "test-sanitizers: the device does not report $lanes-lane subgroups:" >&2
  "$build/apps/vkgrad-info" >&2
  exit 1
fi
ctest --test-dir "$build" -E Consumer --output-on-failure --no-tests=error -j"$(nproc)"
