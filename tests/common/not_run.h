// A test that loops over variants or tilings by name runs those this device offers and, for
// one it lacks (under a device profile, say), says so instead of failing on the refusal; the
// refusal itself is another test's subject.
#pragma once

#include <string>

namespace vkgrad::test {

// Prints "[ NOT RUN  ] Suite.Test: <what>: the device lacks <limit>" once per test and `what`,
// and records it as the test's XML property not_run. (Defined in vk_test.cpp.)
void noteNotRun(const std::string& what, const std::string& limit);

}  // namespace vkgrad::test
