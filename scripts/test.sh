#!/usr/bin/env bash
# Sets up (packages, build) and runs the whole test suite; validation is on in every test.
set -euo pipefail
# Warnings in vkgrad's own code fail the build here (CMakeLists.txt, VKGRAD_WERROR).
export VKGRAD_CMAKE_ARGS="${VKGRAD_CMAKE_ARGS:-} -DVKGRAD_WERROR=ON"
# shellcheck source=scripts/setup.sh
source "$(dirname "${BASH_SOURCE[0]}")/setup.sh"

ctest --test-dir "$VKGRAD_BUILD" --output-on-failure --no-tests=error -j2
