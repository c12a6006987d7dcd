// apps/common/platform.h on Windows.
#if defined(_WIN32)

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
// GetProcessMemoryInfo as kernel32's K32GetProcessMemoryInfo: no psapi.lib to link.
#ifndef PSAPI_VERSION
#define PSAPI_VERSION 2
#endif
#include <io.h>
#include <psapi.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "common/platform.h"

namespace vkgrad::apps {

bool isTerminal(std::FILE* stream) {
  // A console answers GetConsoleMode; _isatty alone also says yes for NUL, a character device.
  const intptr_t os_handle = _get_osfhandle(_fileno(stream));
  if (os_handle == -1) return false;
  DWORD mode = 0;
  return GetConsoleMode(reinterpret_cast<HANDLE>(os_handle), &mode) != 0;
}

uint64_t physicalMemoryBytes() {
  MEMORYSTATUSEX status{};
  status.dwLength = sizeof status;
  return GlobalMemoryStatusEx(&status) ? uint64_t(status.ullTotalPhys) : 0;
}

uint64_t residentBytes() {
  PROCESS_MEMORY_COUNTERS counters{};
  counters.cb = sizeof counters;
  // The working set: the pages of this process now in physical memory.
  return GetProcessMemoryInfo(GetCurrentProcess(), &counters, sizeof counters)
             ? uint64_t(counters.WorkingSetSize)
             : 0;
}

void setEnvironment(const char* name, const std::string& value) {
  // The C runtime keeps its own copy for getenv; the loader and children read the process's.
  _putenv_s(name, value.c_str());
  SetEnvironmentVariableA(name, value.c_str());
}

std::string writeAccessProblem(const std::filesystem::path& dir) {
  // Mode 2: write. Windows has no search permission; ACLs that forbid creating files show at
  // the first save instead.
  if (_waccess(dir.c_str(), 2) == 0) return "";
  return std::strerror(errno);
}

}  // namespace vkgrad::apps

#endif  // _WIN32
