#include "vkgrad/io/atomic_file.h"

// POSIX files: open, write, fsync, rename over the old file, fsync the directory. A Windows
// port needs ReplaceFileW / MoveFileExW(MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)
// and FlushFileBuffers here instead.
#if !defined(__unix__) && !defined(__APPLE__)
#error "io/atomic_file.cpp writes files with POSIX calls (open, fsync, rename); this platform needs a port"
#endif

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <system_error>

#include "vkgrad/core/error.h"

namespace vkgrad::graph {
namespace {

std::string errnoText() { return std::error_code(errno, std::generic_category()).message(); }

// Writes all of bytes to fd, or throws.
void writeAll(int fd, std::string_view bytes, const std::string& where) {
  const char* p = bytes.data();
  size_t size = bytes.size();
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(where + ": write failed: " + errnoText());
    p += n, size -= size_t(n);
  }
}

}  // namespace

void writeFileAtomically(const std::filesystem::path& path,
                         std::span<const std::string_view> pieces) {
  const std::string where = path.string();
  // Same directory, so the rename is atomic; the pid keeps concurrent writers apart.
  const std::filesystem::path temp = path.string() + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(where + ": cannot create " + temp.string() + ": " + errnoText());
  try {
    for (std::string_view piece : pieces) writeAll(fd, piece, where);
    if (::fsync(fd) != 0) throw Error(where + ": fsync failed: " + errnoText());
    if (::close(fd) != 0) throw Error(where + ": close failed: " + errnoText());
  } catch (...) {
    ::close(fd);
    std::filesystem::remove(temp);
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::filesystem::remove(temp);
    throw Error(where + ": cannot replace the file: " + ec.message());
  }
  // The rename itself reaches the disk with the directory; where a file system cannot sync a
  // directory the file is still whole, old or new.
  const std::filesystem::path parent = path.has_parent_path() ? path.parent_path() : ".";
  const int dir = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace vkgrad::graph
