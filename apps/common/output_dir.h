// The output directory of a training run, checked before any training: a run must not end
// unable to save what it learned.
#pragma once

#include <filesystem>

namespace vkgrad::apps {

// Checks that files can be written in dir, or, when it does not exist yet, that it can be
// created (the first save creates it: a run that fails before leaves no empty folder); throws
// Error otherwise. Removes the temporary files of atomic writes that a killed process left.
void prepareOutput(const std::filesystem::path& dir);

}  // namespace vkgrad::apps
