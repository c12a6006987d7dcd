// Reading a file a user names, with the checks every reader shares, so each says the same
// thing for the same mistake: a folder where a file is expected, a file that is missing or
// unreadable, and input that never ends (/dev/zero, a pipe) or is larger than the reader
// takes, which would otherwise end in std::bad_alloc. Errors read "<path>: <problem>" and
// name what was expected ("an edge list").
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

namespace vkgrad::graph {

// The whole file; Error when it is a folder, cannot be opened, or holds more than max_bytes.
std::string readInputFile(const std::filesystem::path& path, const std::string& what,
                          uint64_t max_bytes);
// The same checks without reading (for readers that stream or hand the path to a library):
// Error when path is a folder, is missing or cannot be opened.
void checkInputFile(const std::filesystem::path& path, const std::string& what);

}  // namespace vkgrad::graph
