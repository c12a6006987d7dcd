// Runs one of the built programs (build/apps/vkgrad-<name>) as a child process and
// captures its exit code and output, for the tests of the apps.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/io/json_io.h"

namespace vkgrad::test {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A file's bytes ("" where it cannot be read).
std::string fileBytes(const std::string& path);

// The last line of a program's stdout parsed as JSON (what --json prints).
graph::Json lastJsonLine(const std::string& out);

struct AppRun {
  int exit_code = -1;  // the process's exit status; 128 + signal number if a signal ended it
  std::string out, err;
};

// The tensors of a safetensors file written by a program, by name (their raw words).
std::map<std::string, std::vector<uint32_t>> savedWeights(const std::string& path);

// The resume test of a training app: `train(out, extra)` runs `vkgrad-<app> train` with the
// test's options plus extra. A run of `opts` straight through and one stopped by --stop-at
// `stop` (`unit`: "epoch") then finished by --resume must end with the same weights, bit for
// bit; a fixed option given again with another value (`clash`, e.g. {"--seed", "99"}) must be
// refused with a message containing `clash_message`, and a finished run must not resume.
using TrainFn = std::function<AppRun(const std::string& out, const std::vector<std::string>&)>;
void expectResumeIsBitForBit(const std::string& app, const TrainFn& train, const std::string& dir,
                             const std::vector<std::string>& opts, const char* unit, int stop,
                             int total, const std::vector<std::string>& clash,
                             const std::string& clash_message);

// The program's path: $VKGRAD_APPS_DIR (set by ctest) or the build tree's apps folder.
std::string appPath(const std::string& name);

// Runs vkgrad-<name> with args; env entries are set (or, with an empty value, removed)
// on top of this process's environment. Throws std::runtime_error if it cannot start.
AppRun runApp(const std::string& name, const std::vector<std::string>& args,
              const std::vector<std::pair<std::string, std::string>>& env = {});
// The same, calling during(pid) once the child has started and before waiting for it to end:
// a test can watch the child's files and signal it.
AppRun runApp(const std::string& name, const std::vector<std::string>& args,
              const std::vector<std::pair<std::string, std::string>>& env,
              const std::function<void(int pid)>& during);
#if !defined(_WIN32)
// runApp with the process's file-size limit at `bytes` and SIGXFSZ ignored, so that a write
// past the limit fails with EFBIG ("File too large") as one on a full disk fails with ENOSPC,
// instead of the signal killing the program: what the program does with the failure shows.
// (POSIX only: the shell sets the signal's disposition, which exec keeps, and prlimit the limit.)
AppRun runAppOnAFullDisk(const std::string& name, uintmax_t bytes,
                         const std::vector<std::string>& args);
#endif
// Any program (runApp's worker): path with args, output captured to files.
AppRun runProgram(const std::string& path, const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& env = {},
                  const std::function<void(int pid)>& during = {});

}  // namespace vkgrad::test
