#!/usr/bin/env bash
# The project built with clang (Debian's clang 14) instead of GCC, warnings as errors, and the
# whole suite run on that build: builds into build-clang/ (Release) and runs every test but
# the consumer build (which builds vkgrad again with the default compiler). CI runs it after
# the plain suite (.ci/run). Installs what setup.sh installs, and clang, where missing.
#   scripts/test-clang.sh
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${VKGRAD_CLANG_BUILD_DIR:-$root/build-clang}"
# shellcheck source=scripts/setup.sh
VKGRAD_EXTRA_PACKAGES=clang VKGRAD_SETUP_PACKAGES_ONLY=1 source "$root/scripts/setup.sh"
command -v clang++ >/dev/null || { echo "test-clang: needs clang (apt-get install clang)" >&2; exit 2; }
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DVKGRAD_WERROR=ON \
  -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ >/dev/null
cmake --build "$build" -j"$(nproc)"
ctest --test-dir "$build" -E Consumer --output-on-failure --no-tests=error -j"$(nproc)"
