#include "common/app_main.h"

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>

#include "common/cli.h"

namespace vkgrad::apps {

std::string terminalSafe(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  char hex[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    // C1 controls (U+0080-U+009F) in UTF-8: 0xC2 then 0x80-0x9F.
    const bool c1 = c == 0xc2 && i + 1 < text.size() &&
                    static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
                    static_cast<unsigned char>(text[i + 1]) <= 0x9f;
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7f) {
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else if (c1) {
      std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(text[++i]));
      out += hex;
    } else {
      out += char(c);
    }
  }
  return out;
}

int guardedMain(const char* program, RunFn run, int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const HelpRequested& help) {
    std::fputs(help.text.c_str(), stdout);
    return 0;
  } catch (const UsageError& e) {
    std::fputs(terminalSafe(e.what()).c_str(), stderr);
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "%s: out of host memory (std::bad_alloc): the input or the options ask for more "
                 "memory than this process can have\n",
                 program);
    return 1;
  } catch (const std::exception& e) {
    std::string message = e.what();  // some (device lists) end in a newline of their own
    while (!message.empty() && message.back() == '\n') message.pop_back();
    std::fprintf(stderr, "%s: %s\n", program, terminalSafe(message).c_str());
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
               command.empty() ? "no command given"
                               : terminalSafe("unknown command '" + command + "'").c_str(),
               about, usage);
  return 2;
}

}  // namespace vkgrad::apps
