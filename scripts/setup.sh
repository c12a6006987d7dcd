# shellcheck shell=bash
# Shared by demo.sh and test.sh (sourced, not run): installs the Debian 12 packages
# vkgrad needs when any is missing, then configures and builds into build/ (Release).
# VKGRAD_BUILD_DIR overrides the build folder; VKGRAD_BUILD_TARGETS limits what is built;
# VKGRAD_CMAKE_ARGS adds configure options; VKGRAD_EXTRA_PACKAGES names more packages to
# install (test-clang.sh: clang), and VKGRAD_SETUP_PACKAGES_ONLY=1 stops after installing.

VKGRAD_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VKGRAD_BUILD="${VKGRAD_BUILD_DIR:-$VKGRAD_ROOT/build}"

# Compiler and build tools; the Vulkan headers, loader and volk; the shader compiler and
# validator; GoogleTest; lavapipe (Vulkan on the CPU, for machines without a GPU); the
# validation layers that every test runs under; cairo and the DejaVu fonts to draw the apps'
# pictures, stb to read the images users give them; nlohmann-json for checkpoint headers, configs and --json output; zlib to read gzip-compressed
# data files; Fashion-MNIST (/usr/share/datasets/fashion-mnist), the image data set; GLFW for
# vkgrad-play's window, and Xvfb (with xauth, for xvfb-run) to test it without a display;
# onnx (its protobuf classes) and protobuf for the ONNX importer, and ONNX's node tests
# (libonnx-testdata) that its conformance test runs; PCRE2 for the tokenizers' pre-tokenizer
# patterns (Unicode classes, invalid UTF-8 matched safely) and ICU for their NFC normalizer.
VKGRAD_PACKAGES=(
  cmake g++ make pkg-config
  libvulkan-dev libvulkan-volk-dev
  glslang-tools spirv-tools
  libgtest-dev googletest
  mesa-vulkan-drivers vulkan-validationlayers
  libcairo2-dev fonts-dejavu-core libstb-dev nlohmann-json3-dev
  zlib1g-dev dataset-fashion-mnist
  libglfw3-dev xvfb xauth
  libonnx-dev libprotobuf-dev libonnx-testdata
  libpcre2-dev libicu-dev
)
# shellcheck disable=SC2206  # a space-separated list, split on purpose
VKGRAD_PACKAGES+=(${VKGRAD_EXTRA_PACKAGES:-})

vkgrad_missing_packages() {
  local package status
  for package in "${VKGRAD_PACKAGES[@]}"; do
    status="$(dpkg-query -W -f='${db:Status-Status}' "$package" 2>/dev/null || true)"
    [[ "$status" == installed ]] || printf '%s\n' "$package"
  done
}

vkgrad_install_packages() {
  if ! command -v dpkg-query >/dev/null 2>&1; then
    echo "setup: dpkg-query not found; this script installs packages on Debian 12 only." >&2
    echo "setup: install the equivalents of: ${VKGRAD_PACKAGES[*]}" >&2
    return 1
  fi
  local missing
  mapfile -t missing < <(vkgrad_missing_packages)
  if ((${#missing[@]} == 0)); then
    return 0
  fi
  local apt=(env DEBIAN_FRONTEND=noninteractive apt-get)
  local install_line="apt-get update && apt-get install -y ${missing[*]}"
  echo "setup: installing ${missing[*]}"
  local sudo=()
  if ((EUID != 0)); then
    if ! command -v sudo >/dev/null 2>&1; then
      echo "setup: missing packages and not root (no sudo). Run as root:" >&2
      echo "  $install_line" >&2
      return 1
    fi
    # Without a terminal sudo must not wait for a password nobody can type.
    if [[ -t 0 ]]; then sudo=(sudo); else sudo=(sudo -n); fi
  fi
  if ! "${sudo[@]}" "${apt[@]}" update -q ||
     ! "${sudo[@]}" "${apt[@]}" install -y -q --no-install-recommends "${missing[@]}"; then
    echo "setup: installing packages failed; to install them by hand, as root:" >&2
    echo "  $install_line" >&2
    return 1
  fi
}

# VKGRAD_BUILD_TARGETS (space-separated) builds only those targets: demo.sh builds the one
# program it runs, not the test suite. Unset: everything.
vkgrad_build() {
  cmake -S "$VKGRAD_ROOT" -B "$VKGRAD_BUILD" -DCMAKE_BUILD_TYPE=Release ${VKGRAD_CMAKE_ARGS:-}
  local targets=() target
  for target in ${VKGRAD_BUILD_TARGETS:-}; do targets+=(--target "$target"); done
  cmake --build "$VKGRAD_BUILD" -j "$(nproc)" "${targets[@]}"
}

vkgrad_install_packages
if [[ "${VKGRAD_SETUP_PACKAGES_ONLY:-0}" != 1 ]]; then
  vkgrad_build
fi
