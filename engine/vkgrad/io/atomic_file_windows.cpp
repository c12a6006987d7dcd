// io/atomic_file_platform.h on Windows: CreateFileW, WriteFile, FlushFileBuffers, then
// MoveFileExW over the old file with MOVEFILE_WRITE_THROUGH (it returns once the rename is on
// the disk: Windows has no directory to sync). Windows refuses to rename or delete a file
// that is open, so every handle is closed before a rename or before an error leaves here.
#if defined(_WIN32)

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <algorithm>

#include "vkgrad/core/error.h"
#include "vkgrad/io/atomic_file_platform.h"

namespace vkgrad::graph::platform {
namespace {

// The system's text for error (GetLastError()), without the trailing line break.
std::string errorText(DWORD error) {
  char* text = nullptr;
  const DWORD size = FormatMessageA(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
      nullptr, error, 0, reinterpret_cast<char*>(&text), 0, nullptr);
  std::string out = size ? std::string(text, size) : "error " + std::to_string(error);
  LocalFree(text);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == '.'))
    out.pop_back();
  return out;
}

// Closes a handle when it goes out of scope, so an exception never leaves the file open.
class Handle {
 public:
  explicit Handle(HANDLE h) : h_(h) {}
  ~Handle() { close(); }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  HANDLE get() const { return h_; }
  bool valid() const { return h_ != INVALID_HANDLE_VALUE && h_ != nullptr; }
  // Closes now; false (GetLastError() set) if closing failed.
  bool close() {
    if (!valid()) return true;
    const BOOL ok = CloseHandle(h_);
    h_ = INVALID_HANDLE_VALUE;
    return ok != 0;
  }

 private:
  HANDLE h_;
};

}  // namespace

int64_t currentProcessId() {
  return int64_t(GetCurrentProcessId());
}

bool processHasEnded(int64_t pid) {
  if (pid <= 0 || pid > int64_t(MAXDWORD)) return false;
  Handle process(OpenProcess(PROCESS_QUERY_LIMITED_INFORMATION, FALSE, DWORD(pid)));
  // No such process: OpenProcess refuses the id as an invalid parameter (access denied would
  // mean one exists).
  if (!process.valid()) return GetLastError() == ERROR_INVALID_PARAMETER;
  DWORD code = 0;
  // An ended process can still be opened while another holds a handle to it.
  return GetExitCodeProcess(process.get(), &code) && code != STILL_ACTIVE;
}

void writeDurably(const std::filesystem::path& file, std::span<const std::string_view> pieces,
                  const std::string& where) {
  // No sharing: nobody reads a half-written temporary file.
  Handle out(CreateFileW(file.c_str(), GENERIC_WRITE, 0, nullptr, CREATE_ALWAYS,
                         FILE_ATTRIBUTE_NORMAL, nullptr));
  if (!out.valid())
    throw Error(where + ": cannot create " + file.string() + ": " + errorText(GetLastError()));
  for (std::string_view piece : pieces) {
    const char* p = piece.data();
    size_t size = piece.size();
    while (size > 0) {
      // WriteFile takes a 32-bit count; 1 GiB at a time stays well inside it.
      const DWORD chunk = DWORD(std::min<size_t>(size, size_t(1) << 30));
      DWORD written = 0;
      if (!WriteFile(out.get(), p, chunk, &written, nullptr) || written == 0)
        throw Error(where + ": write failed: " + errorText(GetLastError()));
      p += written, size -= written;
    }
  }
  if (!FlushFileBuffers(out.get()))
    throw Error(where + ": flush failed: " + errorText(GetLastError()));
  if (!out.close()) throw Error(where + ": close failed: " + errorText(GetLastError()));
}

void replaceDurably(const std::filesystem::path& from, const std::filesystem::path& to,
                    const std::string& where) {
  if (!MoveFileExW(from.c_str(), to.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH))
    throw Error(where + ": cannot replace the file: " + errorText(GetLastError()));
}

}  // namespace vkgrad::graph::platform

#endif  // _WIN32
