#include "common/output_dir.h"

#include <fstream>
#include <string>
#include <system_error>

#include "common/platform.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/atomic_file.h"

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
    if (const std::string problem = writeAccessProblem(parent); !problem.empty())
      throw Error(dir.string() + ": cannot create the output directory: " + parent.string() + ": " +
                  problem);
    return;
  }
  if (!std::filesystem::is_directory(dir, ec))
    throw Error(dir.string() + ": cannot create the output directory: a file of that name exists");
  const std::filesystem::path probe = dir / ".vkgrad-write-test";
  if (!std::ofstream(probe, std::ios::binary))
    throw Error(dir.string() + ": cannot write files here");
  std::filesystem::remove(probe, ec);
  // What a killed run left: "<file>.tmp.<pid>" (io/atomic_file.h) of a process now gone.
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec))
    if (entry.is_regular_file(ec) && graph::isAbandonedTemporary(entry.path()))
      std::filesystem::remove(entry.path(), ec);
}

}  // namespace vkgrad::apps
