// Command-line parsing shared by the apps: --name value options, boolean flags,
// --help. Bad arguments throw UsageError and --help throws HelpRequested; guardedMain
// (common/app_main.h) prints them and exits with 2 and 0.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "vkgrad/core/error.h"

namespace vkgrad::apps {

// A bad command line: what() is "<program>: <problem>\n\n<usage>".
class UsageError : public Error {
 public:
  using Error::Error;
};

// --help was given: text is the usage, for stdout. Not an Error: nothing went wrong.
struct HelpRequested {
  std::string text;
};

class Cli {
 public:
  Cli(std::string program, std::string summary);

  // Declare before parse(). Options take a value; flags do not.
  Cli& option(const std::string& name, const std::string& help, const std::string& fallback = "");
  Cli& flag(const std::string& name, const std::string& help);
  // An option that may be given several times (--input a=x.npy --input b=y.npy): getAll()
  // returns every value in order; get() the last.
  Cli& repeated(const std::string& name, const std::string& help);
  // Positional arguments, e.g. the op name of vkgrad-bench ("OP"); a last one named "NAME..."
  // takes every remaining argument.
  Cli& positional(const std::string& name, const std::string& help);

  // Throws HelpRequested for --help, UsageError for an unknown option, a missing value, ...
  void parse(int argc, char** argv);

  bool has(const std::string& name) const;  // flag given, or option given / defaulted
  bool given(const std::string& name) const { return values_.count(name) > 0; }  // on the line
  bool isFlag(const std::string& name) const;
  // Sets a declared option or flag (a flag to any value turns it on) as if it had been given;
  // `source` (a file it was read from) is named when the value is refused.
  void set(const std::string& name, const std::string& value, const std::string& source = "");
  // " (the value saved in <source>)" for a value set from a source, else "".
  std::string origin(const std::string& name) const;
  std::string get(const std::string& name) const;
  std::vector<std::string> getAll(const std::string& name) const;
  // UsageError when not a number in [min, max] (NaN is never in range).
  int64_t getInt(const std::string& name, int64_t min, int64_t max) const;
  double getDouble(const std::string& name, double min, double max) const;
  const std::vector<std::string>& positionals() const { return positional_values_; }

  [[noreturn]] void fail(const std::string& message) const;  // throws UsageError with the usage
  std::string usage() const;

 private:
  struct Entry {
    std::string help, fallback;
    bool is_flag;
    bool repeated = false;
  };
  std::string program_, summary_;
  std::vector<std::string> order_;
  std::map<std::string, Entry> entries_;
  std::vector<std::pair<std::string, std::string>> positional_specs_;
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_values_;  // repeated() options'
  std::map<std::string, std::string> sources_;                  // where set() values came from
  std::vector<std::string> positional_values_;
};

}  // namespace vkgrad::apps
