// The libFuzzer driver of one target of tests/fuzz/targets.h, chosen when compiled
// (VKGRAD_FUZZ_TARGET); fuzz/CMakeLists.txt builds one program per target and fuzz/run.sh
// runs them. A vkgrad::Error is the reader's answer to bad bytes; anything else escapes to
// libFuzzer as a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "vkgrad/core/error.h"
#include "fuzz/targets.h"

namespace {

const vkgrad::fuzz::Target& target() {
  static const vkgrad::fuzz::Target* t = [] {
    const vkgrad::fuzz::Target* found = vkgrad::fuzz::findTarget(VKGRAD_FUZZ_TARGET);
    if (!found) {
      std::fprintf(stderr, "vkgrad-fuzz: no target named %s\n", VKGRAD_FUZZ_TARGET);
      std::abort();
    }
    return found;
  }();
  return *t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    target().run(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const vkgrad::Error&) {
  }
  return 0;
}
