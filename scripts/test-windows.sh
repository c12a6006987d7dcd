#!/usr/bin/env bash
# Cross-builds vkgrad for 64-bit Windows with mingw-w64 (cmake/mingw-w64.cmake) into
# build-windows/ and runs the test suite under Wine, on the host's lavapipe and with the
# host's Khronos validation layer, on a virtual display (Xvfb). Installs the Debian 12
# packages it needs where missing (as scripts/setup.sh does). Prints a summary at the end.
#
# Wine 8 reaches Vulkan only through its X11 driver, hence the display. Wine lists no
# instance layers, so validation is forced through VK_INSTANCE_LAYERS: the host's loader reads
# it (and VK_ICD_FILENAMES, VK_LAYER_PATH) inside winevulkan; Wine hides VK_* variables from
# the Windows program, and the engine accepts the unlisted layer once the instance gets the
# extension it provides. Tests that cannot run under Wine are listed, with why, in
# scripts/windows-excluded-tests.txt.
#
# VKGRAD_BUILD_DIR overrides the build folder, VKGRAD_CMAKE_ARGS adds configure options,
# VKGRAD_JOBS sets the build's and ctest's parallelism (default: nproc), VKGRAD_CTEST_ARGS
# adds ctest options (e.g. -R Suite to run a part).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${VKGRAD_BUILD_DIR:-$ROOT/build-windows}"
JOBS="${VKGRAD_JOBS:-$(nproc)}"
EXCLUDED="$ROOT/scripts/windows-excluded-tests.txt"

# The host's packages (setup.sh's list: compilers of shaders, Vulkan headers, lavapipe, the
# validation layer, GoogleTest's sources, Xvfb) and the cross compilers, zlib for mingw, Wine.
export VKGRAD_EXTRA_PACKAGES="${VKGRAD_EXTRA_PACKAGES:-} g++-mingw-w64-x86-64-posix libz-mingw-w64-dev wine64"
export VKGRAD_SETUP_PACKAGES_ONLY=1
# shellcheck source=scripts/setup.sh
source "$ROOT/scripts/setup.sh"

WINE=/usr/lib/wine/wine64
WINESERVER=/usr/lib/wine/wineserver
[[ -x $WINE ]] || WINE="$(command -v wine64 || command -v wine)"
[[ -x $WINESERVER ]] || WINESERVER="$(command -v wineserver)"

# --- Build ---------------------------------------------------------------------------------
# Debian packages no mingw protobuf or ONNX: the importer is left out (CMake says what else is).
build_start=$SECONDS
# shellcheck disable=SC2086  # VKGRAD_CMAKE_ARGS is a space-separated list
cmake -S "$ROOT" -B "$BUILD" -DCMAKE_TOOLCHAIN_FILE="$ROOT/cmake/mingw-w64.cmake" \
  -DVulkan_LIBRARY=vulkan-1 -DVKGRAD_ONNX=OFF -DCMAKE_BUILD_TYPE=Release -DVKGRAD_WERROR=ON \
  ${VKGRAD_CMAKE_ARGS:-}
cmake --build "$BUILD" -j "$JOBS"
build_seconds=$((SECONDS - build_start))

# --- Wine, a display, Vulkan -----------------------------------------------------------------
# A Wine prefix of the build's own (made once, ~1 minute), never the user's ~/.wine.
export WINEPREFIX="$BUILD/wine"
export WINEDEBUG=-all
# No Mono or Gecko: nothing here needs .NET or a browser, and Wine would offer to download them.
export WINEDLLOVERRIDES="mscoree,mshtml="
scratch="$(mktemp -d)"
xvfb_pid=""
cleanup() {
  "$WINESERVER" -k 2>/dev/null || true
  if [[ -n $xvfb_pid ]]; then kill "$xvfb_pid" 2>/dev/null || true; fi
  rm -rf "$scratch"
}
trap cleanup EXIT

# Xvfb on the first free display (-displayfd writes the number it took).
Xvfb -displayfd 3 -screen 0 640x480x24 -nolisten tcp 3>"$scratch/display" 2>"$scratch/xvfb.log" &
xvfb_pid=$!
for _ in $(seq 100); do
  [[ -s $scratch/display ]] && break
  sleep 0.1
done
if [[ ! -s $scratch/display ]]; then
  echo "test-windows: Xvfb did not start:" >&2
  cat "$scratch/xvfb.log" >&2
  exit 1
fi
export DISPLAY=":$(head -n1 "$scratch/display")"

if [[ ! -f $WINEPREFIX/system.reg ]]; then
  echo "test-windows: making the Wine prefix $WINEPREFIX"
  "$WINE" wineboot -i >/dev/null 2>&1 || true
fi
# One persistent wineserver: without it every test's process starts and stops its own (~3 s).
"$WINESERVER" -p || true # (it exits 2 where this prefix's server already runs)
"$WINE" cmd /c exit 2>/dev/null || true  # the prefix's services started once, up front

# The host's loader (inside winevulkan) loads the driver and the layer: lavapipe alone, and the
# validation layer forced on, since Wine lists none. These reach the host's loader only: a
# test can change none of them for its child processes.
lavapipe_icd="$(ls /usr/share/vulkan/icd.d/lvp_icd.*.json | head -n1)"
export VK_ICD_FILENAMES="$lavapipe_icd"
export VK_LAYER_PATH=/usr/share/vulkan/explicit_layer.d
export VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation

# --- The suite -----------------------------------------------------------------------------
# scripts/windows-excluded-tests.txt: one test name (a regular expression) a line, then its
# reason after '#'.
excluded_names=()
while IFS= read -r line; do
  name="${line%%#*}"
  name="${name//[[:space:]]/}"
  [[ -n $name ]] && excluded_names+=("$name")
done <"$EXCLUDED"
exclude_regex="^($(
  IFS='|'
  echo "${excluded_names[*]}"
))\$"

# ctest lists the tests under Wine when it starts and leaves these out of their batches
# (tests/CMakeLists.txt); -E leaves out the ctest tests that are not GoogleTest's (Consumer.*).
export VKGRAD_TEST_EXCLUDE="$exclude_regex"
suite_start=$SECONDS
status=0
# shellcheck disable=SC2086  # VKGRAD_CTEST_ARGS is a space-separated list
ctest --test-dir "$BUILD" --output-on-failure --no-tests=error -j "$JOBS" -E "$exclude_regex" \
  ${VKGRAD_CTEST_ARGS:-} | tee "$scratch/ctest.log" || status=$?
suite_seconds=$((SECONDS - suite_start))

echo
echo "=== vkgrad on Windows (mingw-w64), under Wine ==="
echo "wine: $("$WINE" --version); mesa (lavapipe): $(dpkg-query -W -f='${Version}' mesa-vulkan-drivers 2>/dev/null || echo '?')"
grep -E '^[0-9]+% tests passed' "$scratch/ctest.log" || echo "ctest gave no result line"
# Each test's own result, read from gtest's lines inside the batches (scripts/profile-refusals.awk).
awk -f "$ROOT/scripts/profile-refusals.awk" "$BUILD/Testing/Temporary/LastTest.log" |
  awk '{n[$2]++} END {printf "tests: %d passed, %d failed, %d skipped\n", n["pass"], n["fail"], n["skip"]}'
echo "excluded under Wine: the ${#excluded_names[@]} patterns of scripts/windows-excluded-tests.txt"
echo "build: ${build_seconds} s; suite: ${suite_seconds} s (-j $JOBS)"
exit "$status"
