// What the tests ask of the operating system: this process's id and environment, and child
// processes (the apps' tests run the programs). A POSIX implementation (process_posix.cpp)
// and a Windows one (process_windows.cpp), each compiling to nothing on the other.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace vkgrad::test {

// This process's id: it names the tests' temporary folders, so that suites running side by
// side (two builds' ctest at once) never share one.
int processId();

// Sets the environment variable name to value, or removes it where value is null.
void setEnv(const char* name, const char* value);

// Whether path names a program this process may run.
bool isExecutable(const std::string& path);

// A program's file name as the build writes it: "vkgrad-gpt" here, "vkgrad-gpt.exe" on
// Windows.
std::string executableName(const std::string& stem);

// The exit status of a child that killProcess ended, as a POSIX shell reports a SIGKILL.
constexpr int kKilledExitCode = 128 + 9;

// Ends process pid at once (SIGKILL; on Windows TerminateProcess with kKilledExitCode).
// False if it could not be ended (gone already, or not ours).
bool killProcess(int pid);

// Runs path with args. Its environment is this process's with env applied (an entry with an
// empty value is removed); stdin is empty, stdout and stderr go to the files out_path and
// err_path (files, not pipes: a chatty child can never block on a full pipe). Calls
// during(pid) once the child has started, then waits for it to end and returns its exit
// status (128 + the signal's number if a signal ended it). Throws std::runtime_error if it
// cannot start.
int runChild(const std::string& path, const std::vector<std::string>& args,
             const std::vector<std::pair<std::string, std::string>>& env,
             const std::string& out_path, const std::string& err_path,
             const std::function<void(int pid)>& during);

}  // namespace vkgrad::test
