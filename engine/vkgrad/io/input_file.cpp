#include "vkgrad/io/input_file.h"

#include <cerrno>
#include <cstring>
#include <fstream>

#include "vkgrad/core/error.h"

namespace vkgrad::graph {

namespace fs = std::filesystem;

void checkInputFile(const fs::path& path, const std::string& what) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw Error(path.string() + ": is a directory, not " + what);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": cannot open: " + std::strerror(errno));
}

std::string readInputFile(const fs::path& path, const std::string& what, uint64_t max_bytes) {
  checkInputFile(path, what);
  std::ifstream in(path, std::ios::binary);
  std::string text;
  // Read in chunks and stop past the limit: a character device or a pipe has no size to check
  // first, and /dev/zero never ends.
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    text.append(chunk, size_t(in.gcount()));
    if (text.size() > max_bytes)
      throw Error(path.string() + ": more than " + std::to_string(max_bytes) +
                  " bytes, more than " + what + " may hold here");
  }
  if (in.bad()) throw Error(path.string() + ": read failed: " + std::strerror(errno));
  return text;
}

}  // namespace vkgrad::graph
