// io/atomic_file_platform.h on POSIX systems: open, write, fsync, rename over the old file,
// fsync the directory. This is the portable helper's POSIX side, so it is the one file in
// engine/ that includes POSIX headers (fsync has no portable spelling); Windows builds take
// atomic_file_windows.cpp instead.
#if !defined(_WIN32)

#if !defined(__unix__) && !defined(__APPLE__)
#error \
    "io/atomic_file_posix.cpp writes files with POSIX calls (open, fsync, rename); this platform needs a port"
#endif

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

#include "vkgrad/core/error.h"
#include "vkgrad/io/atomic_file_platform.h"

namespace vkgrad::graph::platform {
namespace {

std::string errnoText() {
  return std::error_code(errno, std::generic_category()).message();
}

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

int64_t currentProcessId() {
  return int64_t(::getpid());
}

bool processHasEnded(int64_t pid) {
  if (pid <= 0 || pid != int64_t(pid_t(pid))) return false;
  // Signal 0 only asks whether the process exists; EPERM means it does, owned by another user.
  return ::kill(pid_t(pid), 0) != 0 && errno == ESRCH;
}

void writeDurably(const std::filesystem::path& file, std::span<const std::string_view> pieces,
                  const std::string& where) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(where + ": cannot create " + file.string() + ": " + errnoText());
  try {
    for (std::string_view piece : pieces) writeAll(fd, piece, where);
    if (::fsync(fd) != 0) throw Error(where + ": fsync failed: " + errnoText());
  } catch (...) {
    ::close(fd);
    throw;
  }
  if (::close(fd) != 0) throw Error(where + ": close failed: " + errnoText());
}

void replaceDurably(const std::filesystem::path& from, const std::filesystem::path& to,
                    const std::string& where) {
  std::error_code ec;
  std::filesystem::rename(from, to, ec);
  if (ec) throw Error(where + ": cannot replace the file: " + ec.message());
  // The rename itself reaches the disk with the directory; where a file system cannot sync a
  // directory the file is still whole, old or new.
  const std::filesystem::path parent = to.has_parent_path() ? to.parent_path() : ".";
  const int dir = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
}

}  // namespace vkgrad::graph::platform

#endif  // !_WIN32
