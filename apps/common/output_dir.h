// The output directory of a training run, checked before any training: a run must not end
// unable to save what it learned.
#pragma once

#include <filesystem>

namespace vkgrad::apps {

// Creates dir if needed and checks that a file can be written in it; throws Error otherwise.
// Removes the temporary files of atomic writes that a killed process left there.
void prepareOutput(const std::filesystem::path& dir);

}  // namespace vkgrad::apps
