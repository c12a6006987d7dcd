#include "common/output_dir.h"

#include <signal.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string>
#include <system_error>

#include "vkgrad/core/error.h"

namespace vkgrad::apps {

void prepareOutput(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create the output directory: " + ec.message());
  const std::filesystem::path probe = dir / ".vkgrad-write-test";
  if (!std::ofstream(probe, std::ios::binary))
    throw Error(dir.string() + ": cannot write files here");
  std::filesystem::remove(probe, ec);
  // What a killed run left: "<file>.tmp.<pid>" (graph/atomic_file.h) of a process now gone.
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp.");
    if (at == std::string::npos || !entry.is_regular_file(ec)) continue;
    const std::string digits = name.substr(at + 5);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const long pid = std::strtol(digits.c_str(), nullptr, 10);
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH)
      std::filesystem::remove(entry.path(), ec);
  }
}

}  // namespace vkgrad::apps
