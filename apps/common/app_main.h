// What every app's main() does around its work: subcommand dispatch with --help, and the one
// place an escaping exception becomes "<program>: <message>" on stderr and exit status 1
// (bad options exit 2 from Cli, before any work).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace vkgrad::apps {

using RunFn = int (*)(int argc, char** argv);

// text with every byte a terminal would act on (C0 and C1 controls but newline and tab, DEL)
// written as \xHH or \uHHHH: an error that echoes a hostile input line cannot clear the
// screen or retitle the window.
std::string terminalSafe(std::string_view text);

// Runs run(argc, argv) and returns its status: --help (HelpRequested) prints the usage and
// gives 0, a bad command line (UsageError) gives 2, any other exception is reported (through
// terminalSafe) and gives 1; std::bad_alloc says the host memory ran out.
int guardedMain(const char* program, RunFn run, int argc, char** argv);

struct Command {
  const char* name;  // argv[1]
  RunFn run;         // gets the whole argv (argv[1] is the command)
};

// Runs the command argv[1] names, guarded as guardedMain. --help, -h or help print `about`
// and `usage` to stdout (exit 0); no command or an unknown one prints them to stderr after
// saying so (exit 2).
int commandMain(const char* program, const char* about, const char* usage,
                std::initializer_list<Command> commands, int argc, char** argv);

}  // namespace vkgrad::apps
