#include "common/output_dir.h"

#include <fstream>
#include <system_error>

#include "core/error.h"

namespace vkgrad::apps {

void prepareOutput(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create the output directory: " + ec.message());
  const std::filesystem::path probe = dir / ".vkgrad-write-test";
  if (!std::ofstream(probe, std::ios::binary))
    throw Error(dir.string() + ": cannot write files here");
  std::filesystem::remove(probe, ec);
}

}  // namespace vkgrad::apps
