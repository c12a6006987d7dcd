#include "vkgrad/io/atomic_file.h"

#include <cstdint>
#include <string>
#include <system_error>

#include "vkgrad/io/atomic_file_platform.h"

namespace vkgrad::graph {
namespace {

constexpr std::string_view kTemporaryMark = ".tmp.";

}  // namespace

void writeFileAtomically(const std::filesystem::path& path,
                         std::span<const std::string_view> pieces) {
  const std::string where = path.string();
  // Same directory, so the rename is atomic; the pid keeps concurrent writers apart.
  std::filesystem::path temp = path;
  temp += std::string(kTemporaryMark) + std::to_string(platform::currentProcessId());
  try {
    platform::writeDurably(temp, pieces, where);
    platform::replaceDurably(temp, path, where);
  } catch (...) {
    std::error_code ec;
    std::filesystem::remove(temp, ec);
    throw;
  }
}

bool isAbandonedTemporary(const std::filesystem::path& file) {
  const std::string name = file.filename().string();
  const size_t at = name.rfind(kTemporaryMark);
  if (at == std::string::npos) return false;
  const std::string digits = name.substr(at + kTemporaryMark.size());
  // A longer run of digits is no process id (and would overflow).
  if (digits.empty() || digits.size() > 18 ||
      digits.find_first_not_of("0123456789") != std::string::npos)
    return false;
  const int64_t pid = std::stoll(digits);
  return pid > 0 && platform::processHasEnded(pid);
}

}  // namespace vkgrad::graph
