#include "apps/run_app.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

#include "common/process.h"
#include "vkgrad/io/safetensors.h"

namespace vkgrad::test {

std::string fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

namespace {

// A child's output as text: on Windows the C runtime ends its lines "\r\n", read back as "\n"
// so that the tests compare the same text everywhere.
std::string childOutput(const std::string& path) {
  std::string s = fileBytes(path);
  size_t kept = 0;
  for (size_t i = 0; i < s.size(); ++i)
    if (!(s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n')) s[kept++] = s[i];
  s.resize(kept);
  return s;
}

}  // namespace

std::string appPath(const std::string& name) {
  const char* dir = std::getenv("VKGRAD_APPS_DIR");
  return std::string(dir && *dir ? dir : VKGRAD_DEFAULT_APPS_DIR) + "/" +
         executableName("vkgrad-" + name);
}

AppRun runApp(const std::string& name, const std::vector<std::string>& args,
              const std::vector<std::pair<std::string, std::string>>& env) {
  return runApp(name, args, env, {});
}

AppRun runApp(const std::string& name, const std::vector<std::string>& args,
              const std::vector<std::pair<std::string, std::string>>& env,
              const std::function<void(int pid)>& during) {
  const std::string path = appPath(name);
  if (!isExecutable(path))
    throw std::runtime_error(path + " is not an executable (are the apps built?)");
  return runProgram(path, args, env, during);
}

#if !defined(_WIN32)
AppRun runAppOnAFullDisk(const std::string& name, uintmax_t bytes,
                         const std::vector<std::string>& args) {
  std::vector<std::string> shell{
      "-c", "trap '' XFSZ; exec /usr/bin/prlimit --fsize=" + std::to_string(bytes) + " \"$@\"",
      "sh", appPath(name)};
  shell.insert(shell.end(), args.begin(), args.end());
  return runProgram("/bin/sh", shell);
}
#endif

AppRun runProgram(const std::string& path, const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& env,
                  const std::function<void(int pid)>& during) {
  const std::string name = std::filesystem::path(path).filename().string();

  // Output goes to files, not pipes, so a chatty child can never block on a full pipe.
  static std::atomic<int> counter{0};
  const std::string stem = ::testing::TempDir() + name + "-" + std::to_string(processId()) + "-" +
                           std::to_string(counter++);
  const std::string out_path = stem + ".out", err_path = stem + ".err";

  AppRun run;
  run.exit_code = runChild(path, args, env, out_path, err_path, during);
  run.out = childOutput(out_path);
  run.err = childOutput(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  // A failing program's reason in the test's log, whatever the test prints: the device
  // profile runs (scripts/test-profiles.sh) read refusals from there.
  if (run.exit_code != 0)
    std::printf("[%s exited %d] %s\n", name.c_str(), run.exit_code,
                run.err.substr(run.err.size() > 600 ? run.err.size() - 600 : 0).c_str());
  return run;
}

std::map<std::string, std::vector<uint32_t>> savedWeights(const std::string& path) {
  std::map<std::string, std::vector<uint32_t>> out;
  for (graph::SavedTensor& t : graph::loadSafetensors(path).tensors)
    out[t.name] = std::move(t.data);
  return out;
}

void expectResumeIsBitForBit(const std::string& app, const TrainFn& train, const std::string& dir,
                             const std::vector<std::string>& opts, const char* unit, int stop,
                             int total, const std::vector<std::string>& clash,
                             const std::string& clash_message) {
  const std::string straight = dir + "/straight", paused = dir + "/paused";
  const AppRun whole = train(straight, opts);
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  std::vector<std::string> stopping = opts;
  stopping.insert(stopping.end(), {"--stop-at", std::to_string(stop)});
  const AppRun first = train(paused, stopping);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string where =
      std::string(unit) + " " + std::to_string(stop) + " of " + std::to_string(total);
  EXPECT_TRUE(contains(first.out, "stopped after " + where)) << first.out;

  std::vector<std::string> changed{"train", "--resume", paused};
  changed.insert(changed.end(), clash.begin(), clash.end());
  const AppRun refused = runApp(app, changed);
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_TRUE(contains(refused.err, clash_message)) << refused.err;

  const AppRun rest = runApp(app, {"train", "--resume", paused, "--validation"});
  ASSERT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_TRUE(contains(rest.out, "resumed after " + where)) << rest.out;
  EXPECT_EQ(savedWeights(straight + "/model.safetensors"),
            savedWeights(paused + "/model.safetensors"))
      << "the weights differ after the resume";
  const AppRun again = runApp(app, {"train", "--resume", paused});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_TRUE(contains(again.err, "nothing to resume")) << again.err;
}

graph::Json lastJsonLine(const std::string& out) {
  const size_t end = out.find_last_not_of('\n');
  const size_t begin = out.rfind('\n', end);
  return graph::parseJson(out.substr(begin == std::string::npos ? 0 : begin + 1), "stdout");
}

}  // namespace vkgrad::test
