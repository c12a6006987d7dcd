// apps/common/platform.h on POSIX systems.
#if !defined(_WIN32)

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include "common/platform.h"

namespace vkgrad::apps {

bool isTerminal(std::FILE* stream) {
  return ::isatty(::fileno(stream)) != 0;
}

uint64_t physicalMemoryBytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page_size = ::sysconf(_SC_PAGESIZE);
  return pages > 0 && page_size > 0 ? uint64_t(pages) * uint64_t(page_size) : 0;
}

uint64_t residentBytes() {
  // Linux's /proc/self/statm: total and resident pages; other systems have no such file.
  std::ifstream statm("/proc/self/statm");
  uint64_t pages_total = 0, pages_resident = 0;
  if (!(statm >> pages_total >> pages_resident)) return 0;
  return pages_resident * uint64_t(::sysconf(_SC_PAGESIZE));
}

void setEnvironment(const char* name, const std::string& value) {
  ::setenv(name, value.c_str(), 1);
}

std::string writeAccessProblem(const std::filesystem::path& dir) {
  // Creating a file in a directory takes write and search permission on it.
  if (::access(dir.c_str(), W_OK | X_OK) == 0) return "";
  return std::strerror(errno);
}

}  // namespace vkgrad::apps

#endif  // !_WIN32
