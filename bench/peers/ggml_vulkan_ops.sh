#!/usr/bin/env bash
# Builds and runs ggml_vulkan_ops.cpp, the ggml Vulkan peer of vkgrad's op benchmarks (see its
# top comment). Benchmark tool only: nothing in vkgrad's build, tests or setup runs it.
#   bash bench/peers/ggml_vulkan_ops.sh deps          # glslc/Vulkan headers new enough (see below)
#   bash bench/peers/ggml_vulkan_ops.sh build         # static ggml, GGML_BUILD/ggml_vulkan_ops and
#                                                     # .ggml/ggml_vulkan_ops.xz (what a GPU call carries)
#   bash bench/peers/ggml_vulkan_ops.sh run [ARGS]    # here, on lavapipe: --quick unless ARGS given
#   LAVAPIPE=1 bash bench/peers/ggml_vulkan_ops.sh deps|build   # for lavapipe only: Debian
#                                                     # 12's glslc, Debian 13's headers
# Environment: GGML_SRC (a checkout of ggml, default /tmp/ggml-src; measured with commit
# d99724f2b141fed9e1a9f402213506c081433465), GGML_BUILD (default /tmp/ggml-build),
# TRIXIE_ROOT (default /tmp/trixie-root), NICE (the build's niceness, default 10).
#
# Why `deps`: Debian 12's glslc (glslang 11) lacks GL_KHR_cooperative_matrix and
# GL_NV_cooperative_matrix2, so ggml would build only its scalar shaders and be measured far
# below its best on an NVIDIA GPU. Debian 13's glslc (shaderc 2025.2, glslang 15) and Vulkan
# 1.4.309 headers are unpacked into TRIXIE_ROOT (not installed) and glslc runs on Debian 13's
# own libc through its loader. Only build-time tools: the binary links Debian 12's libvulkan.
# The GPU machine runs the packed binary with bench/gpu/ggml.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
src=${GGML_SRC:-/tmp/ggml-src}
bld=${GGML_BUILD:-/tmp/ggml-build}
tr=${TRIXIE_ROOT:-/tmp/trixie-root}

deps() {
  apt-get install -y --no-install-recommends cmake g++ libvulkan-dev xz-utils >/dev/null
  # LAVAPIPE=1: Debian 12's glslc, and only Debian 13's Vulkan and SPIR-V headers (ggml's
  # host code names VK_EXT_layer_settings, newer than Debian 12's headers 1.3.239).
  local pkgs=(glslc libshaderc1 libc6 libgcc-s1 libstdc++6 libvulkan-dev spirv-headers)
  if [[ ${LAVAPIPE:-0} == 1 ]]; then
    apt-get install -y --no-install-recommends glslc >/dev/null
    pkgs=(libvulkan-dev spirv-headers)
  fi
  local st=/tmp/trixie-apt
  mkdir -p $st/lists/partial $st/cache/archives/partial $st/debs "$tr"
  echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" \
    > $st/sources.list
  local o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$st/lists
    -oDir::Etc::SourceList=$st/sources.list -oDir::Etc::SourceParts=/nonexistent
    -oDir::Cache=$st/cache -oDir::State::status=/dev/null"
  apt-get $o update >/dev/null
  (cd $st/debs && apt-get $o download "${pkgs[@]}")
  for f in $st/debs/*.deb; do dpkg -x "$f" "$tr"; done
  [[ ${LAVAPIPE:-0} == 1 ]] && { glslc --version | head -1; return; }
  cat > "$tr/glslc" <<EOF
#!/bin/sh
exec $tr/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2 --library-path $tr/usr/lib/x86_64-linux-gnu $tr/usr/bin/glslc "\$@"
EOF
  chmod +x "$tr/glslc"
  "$tr/glslc" --version | head -1
}

build() {
  [[ -f $src/include/ggml-vulkan.h ]] || { echo "no ggml checkout at $src (set GGML_SRC)" >&2; exit 1; }
  # LAVAPIPE=1: Debian 12's own glslc, enough for lavapipe, which has no cooperative matrices
  # for the newer glslc's shaders to use (and it builds them in far less time on 2 cores).
  local glslc=$tr/glslc
  [[ ${LAVAPIPE:-0} == 1 ]] && glslc=/usr/bin/glslc
  [[ -x $glslc && -f $tr/usr/include/vulkan/vulkan.hpp ]] || { echo "run '$0 deps' first" >&2; exit 1; }
  if [[ ! -f $bld/CMakeCache.txt ]]; then
    cmake -S "$src" -B "$bld" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DGGML_VULKAN=ON -DGGML_CPU=OFF -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF \
      -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF \
      -DVulkan_INCLUDE_DIR="$tr/usr/include" -DVulkan_LIBRARY=/usr/lib/x86_64-linux-gnu/libvulkan.so \
      -DVulkan_GLSLC_EXECUTABLE="$glslc" -DSPIRV-Headers_DIR="$tr/usr/share/cmake/SPIRV-Headers"
  fi
  nice -n "${NICE:-10}" cmake --build "$bld" -j"${JOBS:-2}"
  mkdir -p .ggml
  local bin=$bld/ggml_vulkan_ops
  nice -n "${NICE:-10}" g++ -std=c++17 -O2 -Wall bench/peers/ggml_vulkan_ops.cpp -I "$src/include" \
    "$bld/src/ggml-vulkan/libggml-vulkan.a" "$bld/src/libggml.a" "$bld/src/libggml-base.a" \
    -lvulkan -lpthread -static-libstdc++ -static-libgcc -o "$bin"
  strip "$bin"
  [[ ${LAVAPIPE:-0} == 1 ]] && { ls -l "$bin"; return; }  # for here only: nothing to carry
  # About 54 MB stripped (ggml embeds every shader variant as SPIR-V), about 6 MB compressed.
  rm -f .ggml/ggml_vulkan_ops
  nice -n "${NICE:-10}" xz -9e -T1 -c "$bin" > .ggml/ggml_vulkan_ops.xz
  ls -l "$bin" .ggml/
}

run() {
  local bin=$bld/ggml_vulkan_ops
  [[ -x $bin ]] || { echo "build first" >&2; exit 1; }
  # ggml hides CPU Vulkan devices (lavapipe) unless they are named.
  GGML_VK_VISIBLE_DEVICES=${GGML_VK_VISIBLE_DEVICES:-0} "$bin" "${@:---quick}"
}

cmd=${1:-}; shift || true
case $cmd in
  deps) deps ;;
  build) build ;;
  run) run "$@" ;;
  *) echo "usage: $0 deps|build|run [ARGS]" >&2; exit 2 ;;
esac
