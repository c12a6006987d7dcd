// tests/common/process.h on POSIX systems: posix_spawn, waitpid, kill.
#if !defined(_WIN32)

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "common/process.h"

extern char** environ;

namespace vkgrad::test {

int processId() {
  return int(::getpid());
}

void setEnv(const char* name, const char* value) {
  if (value)
    ::setenv(name, value, 1);
  else
    ::unsetenv(name);
}

bool isExecutable(const std::string& path) {
  return ::access(path.c_str(), X_OK) == 0;
}

std::string executableName(const std::string& stem) {
  return stem;
}

bool killProcess(int pid) {
  return ::kill(pid_t(pid), SIGKILL) == 0;
}

int runChild(const std::string& path, const std::vector<std::string>& args,
             const std::vector<std::pair<std::string, std::string>>& env,
             const std::string& out_path, const std::string& err_path,
             const std::function<void(int pid)>& during) {
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) {
    const std::string entry = *e;
    bool overridden = false;
    for (const auto& [key, value] : env) overridden |= entry.rfind(key + "=", 0) == 0;
    if (!overridden) env_strings.push_back(entry);
  }
  for (const auto& [key, value] : env)
    if (!value.empty()) env_strings.push_back(key + "=" + value);
  std::vector<char*> envp, argv{const_cast<char*>(path.c_str())};
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, path.c_str(), &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0)
    throw std::runtime_error("cannot start " + path + ": " + std::strerror(spawned));

  if (during) during(int(pid));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) throw std::runtime_error("waitpid failed for " + path);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace vkgrad::test

#endif  // !_WIN32
