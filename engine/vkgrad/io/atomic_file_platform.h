// The operating system's part of io/atomic_file.h, one file per platform
// (atomic_file_posix.cpp, atomic_file_windows.cpp; each compiles to nothing elsewhere). Every
// function throws Error "<where>: <problem>" on failure and leaves no handle open, so the
// caller can remove the temporary file (Windows refuses to delete a file that is open).
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace vkgrad::graph::platform {

// This process's id, which the temporary files' names carry.
int64_t currentProcessId();

// Whether process pid has ended; false while it runs and where that cannot be told.
bool processHasEnded(int64_t pid);

// Creates (or truncates) file and writes the concatenation of pieces to it, flushed to the
// disk before it is closed.
void writeDurably(const std::filesystem::path& file, std::span<const std::string_view> pieces,
                  const std::string& where);

// Renames from over to (replacing it), the rename made durable where the platform allows.
void replaceDurably(const std::filesystem::path& from, const std::filesystem::path& to,
                    const std::string& where);

}  // namespace vkgrad::graph::platform
