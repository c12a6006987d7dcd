#!/usr/bin/env bash
# Packs what a lent GPU machine needs to run this build (see bench/gpu/README.md) into .gpu/:
# the test binary, its ctest files and the apps of build/ (build first), the Debian libraries
# they link (cairo, libstb, ...) and DejaVu, Debian's validation layer, the Fashion-MNIST files
# and the GPT's corpus (Debian's licenses).
# The loader and GL dispatch libraries go to .gl/ as the device tool's README says.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
mkdir -p .gpu
if ! ls .gpu/vulkan-validationlayers_*.deb >/dev/null 2>&1 || ! ls .gl/libvulkan1_*.deb >/dev/null 2>&1; then
  mkdir -p .gl /tmp/amd64/partial
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  apt-get $o update >/dev/null
  (cd .gl && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2)
  (cd .gpu && apt-get $o download vulkan-validationlayers)
fi
tar -C "$build" -cJf .gpu/build.tar.xz \
  CTestTestfile.cmake tests/CTestTestfile.cmake tests/vkgrad_tests \
  tests/libVkLayer_vkgrad_split_queue_family.so tests/layers \
  "tests/vkgrad_tests[1]_include.cmake" "tests/vkgrad_tests[1]_tests.cmake" \
  $(cd "$build" && ls apps/vkgrad-*)
# The Debian libraries the binaries link (cairo and what it needs, libstb) that a bare image may
# lack; glibc, libstdc++ and the Vulkan loader stay the machine's (setup.sh installs only the
# ones it does not have), and the font files cairo draws with.
rm -rf .gpu/lib && mkdir -p .gpu/lib
ldd "$build"/tests/vkgrad_tests "$build"/apps/vkgrad-* 2>/dev/null | awk '$3 ~ /^\// {print $3}' | sort -u |
  grep -Ev '/(libc|libm|libdl|libpthread|librt|libstdc\+\+|libgcc_s|libvulkan|ld-linux[^/]*)\.so' | xargs -I{} cp -L {} .gpu/lib/
if ! ls .gpu/fonts-dejavu-core_*.deb .gpu/fontconfig-config_*.deb >/dev/null 2>&1; then
  o='-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64'
  (cd .gpu && apt-get $o download fonts-dejavu-core fontconfig-config)
fi
# The GPT's corpus, as here: the machine's own license texts differ from Debian's.
cat $(find /usr/share/common-licenses -type f | sort) > .gpu/licenses.txt
mkdir -p .gpu/fashion-mnist
cp /usr/share/datasets/fashion-mnist/*.gz .gpu/fashion-mnist/
du -sh .gpu .gl
