// tests/common/process.h on Windows: CreateProcessW with inherited file handles,
// WaitForSingleObject, TerminateProcess. Strings are UTF-8 here and UTF-16 for the system.
#if defined(_WIN32)

#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>

#include <cstdlib>
#include <cwctype>
#include <stdexcept>

#include "common/process.h"

namespace vkgrad::test {
namespace {

std::wstring wide(const std::string& text) {
  if (text.empty()) return {};
  const int n = MultiByteToWideChar(CP_UTF8, 0, text.data(), int(text.size()), nullptr, 0);
  std::wstring out(size_t(n), L'\0');
  MultiByteToWideChar(CP_UTF8, 0, text.data(), int(text.size()), out.data(), n);
  return out;
}

// One argument as the C runtime's parser reads it back: quoted when it holds a space, a tab or
// a quote (or is empty); a quote escaped, and the backslashes before a quote or the closing
// quote doubled.
std::wstring quoted(const std::wstring& arg) {
  if (!arg.empty() && arg.find_first_of(L" \t\"") == std::wstring::npos) return arg;
  std::wstring out = L"\"";
  size_t backslashes = 0;
  for (wchar_t c : arg) {
    if (c == L'\\') {
      ++backslashes;
      continue;
    }
    out.append(c == L'"' ? 2 * backslashes + 1 : backslashes, L'\\');
    backslashes = 0;
    out += c;
  }
  out.append(2 * backslashes, L'\\');
  return out + L"\"";
}

// Whether entry ("NAME=value") sets name; Windows's names ignore case.
bool setsName(const std::wstring& entry, const std::wstring& name) {
  if (entry.size() <= name.size() || entry[name.size()] != L'=') return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (std::towupper(entry[i]) != std::towupper(name[i])) return false;
  return true;
}

// This process's environment with env applied, as CreateProcessW's block: "NAME=value" entries
// each ended by a null, the block by another.
std::wstring environmentBlock(const std::vector<std::pair<std::string, std::string>>& env) {
  std::wstring block;
  wchar_t* strings = GetEnvironmentStringsW();
  for (const wchar_t* e = strings; e && *e; e += wcslen(e) + 1) {
    const std::wstring entry = e;
    bool overridden = false;
    for (const auto& [key, value] : env) overridden |= setsName(entry, wide(key));
    if (!overridden) block += entry + L'\0';
  }
  if (strings) FreeEnvironmentStringsW(strings);
  for (const auto& [key, value] : env)
    if (!value.empty()) block += wide(key) + L'=' + wide(value) + L'\0';
  return block + L'\0';
}

// A file the child inherits as a standard handle; throws if it cannot be opened.
HANDLE inheritedFile(const std::string& path, DWORD access, DWORD creation) {
  SECURITY_ATTRIBUTES inherit{sizeof(SECURITY_ATTRIBUTES), nullptr, TRUE};
  const HANDLE h = CreateFileW(wide(path).c_str(), access, FILE_SHARE_READ | FILE_SHARE_WRITE,
                               &inherit, creation, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) throw std::runtime_error("cannot open " + path);
  return h;
}

}  // namespace

int processId() {
  return int(GetCurrentProcessId());
}

void setEnv(const char* name, const char* value) {
  // The C runtime keeps its own copy for getenv; the loader and children read the process's.
  _putenv_s(name, value ? value : "");
  SetEnvironmentVariableA(name, value);
}

bool isExecutable(const std::string& path) {
  const DWORD attributes = GetFileAttributesW(wide(path).c_str());
  return attributes != INVALID_FILE_ATTRIBUTES && !(attributes & FILE_ATTRIBUTE_DIRECTORY);
}

std::string executableName(const std::string& stem) {
  return stem + ".exe";
}

bool killProcess(int pid) {
  const HANDLE process = OpenProcess(PROCESS_TERMINATE, FALSE, DWORD(pid));
  if (!process) return false;
  const bool ended = TerminateProcess(process, kKilledExitCode) != 0;
  CloseHandle(process);
  return ended;
}

int runChild(const std::string& path, const std::vector<std::string>& args,
             const std::vector<std::pair<std::string, std::string>>& env,
             const std::string& out_path, const std::string& err_path,
             const std::function<void(int pid)>& during) {
  std::wstring command = quoted(wide(path));
  for (const std::string& a : args) command += L' ' + quoted(wide(a));
  std::wstring block = environmentBlock(env);

  // Ours are closed on the way out, whatever happens: the child holds its own copies, and a
  // file left open here could not be deleted.
  struct StandardFiles {
    HANDLE in = INVALID_HANDLE_VALUE, out = INVALID_HANDLE_VALUE, err = INVALID_HANDLE_VALUE;
    ~StandardFiles() {
      for (HANDLE h : {in, out, err})
        if (h != INVALID_HANDLE_VALUE) CloseHandle(h);
    }
  } files;
  files.in = inheritedFile("NUL", GENERIC_READ, OPEN_EXISTING);
  files.out = inheritedFile(out_path, GENERIC_WRITE, CREATE_ALWAYS);
  files.err = inheritedFile(err_path, GENERIC_WRITE, CREATE_ALWAYS);
  STARTUPINFOW startup{};
  startup.cb = sizeof startup;
  startup.dwFlags = STARTF_USESTDHANDLES;
  startup.hStdInput = files.in;
  startup.hStdOutput = files.out;
  startup.hStdError = files.err;
  PROCESS_INFORMATION info{};
  if (!CreateProcessW(wide(path).c_str(), command.data(), nullptr, nullptr, TRUE,
                      CREATE_UNICODE_ENVIRONMENT, block.data(), nullptr, &startup, &info))
    throw std::runtime_error("cannot start " + path + ": error " + std::to_string(GetLastError()));
  CloseHandle(info.hThread);

  if (during) during(int(info.dwProcessId));
  WaitForSingleObject(info.hProcess, INFINITE);
  DWORD code = 0;
  const BOOL got = GetExitCodeProcess(info.hProcess, &code);
  CloseHandle(info.hProcess);
  if (!got) throw std::runtime_error("cannot read the exit status of " + path);
  return int(code);
}

}  // namespace vkgrad::test

#endif  // _WIN32
