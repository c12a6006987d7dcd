// The message of the vkgrad::Error that call() throws, or "(no error)" where it throws none:
// for tests that check what a refusal says.
#pragma once

#include <functional>
#include <string>

#include "vkgrad/core/error.h"

namespace vkgrad::test {

inline std::string errorText(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace vkgrad::test
