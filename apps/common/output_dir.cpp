#include "common/output_dir.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

#include "vkgrad/core/error.h"

namespace vkgrad::apps {

void prepareOutput(const std::filesystem::path& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    // Made by the first save, not now: a run that fails before it leaves no empty folder.
    // The nearest folder that exists must let it be made.
    std::filesystem::path parent = std::filesystem::absolute(dir, ec).parent_path();
    while (!parent.empty() && !std::filesystem::exists(parent, ec) && parent != parent.root_path())
      parent = parent.parent_path();
    if (!std::filesystem::is_directory(parent, ec))
      throw Error(dir.string() + ": cannot create the output directory: " + parent.string() +
                  " is not a directory");
    if (::access(parent.c_str(), W_OK | X_OK) != 0)
      throw Error(dir.string() + ": cannot create the output directory: " + parent.string() + ": " +
                  std::strerror(errno));
    return;
  }
  if (!std::filesystem::is_directory(dir, ec))
    throw Error(dir.string() + ": cannot create the output directory: a file of that name exists");
  const std::filesystem::path probe = dir / ".vkgrad-write-test";
  if (!std::ofstream(probe, std::ios::binary))
    throw Error(dir.string() + ": cannot write files here");
  std::filesystem::remove(probe, ec);
  // What a killed run left: "<file>.tmp.<pid>" (io/atomic_file.h) of a process now gone.
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
