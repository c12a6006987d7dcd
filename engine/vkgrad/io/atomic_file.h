// Writing a file so that a crash or a full disk leaves the old file or the new one, never
// half of one: the bytes go to a temporary file beside the target, are flushed to disk, and
// the temporary file is renamed over the target. Checkpoints and their configs use it.
#pragma once

#include <filesystem>
#include <span>
#include <string_view>

namespace vkgrad::graph {

// Writes the concatenation of pieces to path. Throws Error "<path>: <problem>" (the target
// is then left as it was and the temporary file removed).
void writeFileAtomically(const std::filesystem::path& path,
                         std::span<const std::string_view> pieces);
inline void writeFileAtomically(const std::filesystem::path& path, std::string_view text) {
  writeFileAtomically(path, std::span<const std::string_view>(&text, 1));
}

// Whether file is the temporary file of an atomic write ("<target>.tmp.<pid>") whose process
// has ended: what a killed writer left, safe to remove. False for any other name, and for a
// writer still running or one whose state cannot be told.
bool isAbandonedTemporary(const std::filesystem::path& file);

}  // namespace vkgrad::graph
