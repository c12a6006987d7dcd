#!/usr/bin/env bash
# ctest's emulator in a mingw-w64 build (cmake/mingw-w64.cmake): runs a Windows program under
# Wine. Its standard output reaches ctest with Unix line ends: the C runtime writes "\r\n",
# and the "\r" would end up in the test names gtest_discover_tests reads from
# --gtest_list_tests. The program's exit status is kept.
set -o pipefail
wine=/usr/lib/wine/wine64
[[ -x $wine ]] || wine="$(command -v wine64 || command -v wine)"
"$wine" "$@" | tr -d '\r'
