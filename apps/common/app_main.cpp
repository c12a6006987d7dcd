#include "common/app_main.h"

#include <cstdio>
#include <exception>
#include <string>

#include "common/cli.h"

namespace vkgrad::apps {

int guardedMain(const char* program, RunFn run, int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const HelpRequested& help) {
    std::fputs(help.text.c_str(), stdout);
    return 0;
  } catch (const UsageError& e) {
    std::fputs(e.what(), stderr);
    return 2;
  } catch (const std::exception& e) {
    std::string message = e.what();  // some (device lists) end in a newline of their own
    while (!message.empty() && message.back() == '\n') message.pop_back();
    std::fprintf(stderr, "%s: %s\n", program, message.c_str());
    return 1;
  }
}

int commandMain(const char* program, const char* about, const char* usage,
                std::initializer_list<Command> commands, int argc, char** argv) {
  const std::string command = argc > 1 ? argv[1] : "";
  for (const Command& c : commands)
    if (command == c.name) return guardedMain(program, c.run, argc, argv);
  if (command == "--help" || command == "-h" || command == "help") {
    std::printf("%s\n\n%s", about, usage);
    return 0;
  }
  std::fprintf(stderr, "%s: %s\n%s\n\n%s", program,
               command.empty() ? "no command given" : ("unknown command '" + command + "'").c_str(),
               about, usage);
  return 2;
}

}  // namespace vkgrad::apps
