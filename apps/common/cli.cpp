#include "common/cli.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>

namespace vkgrad::apps {

Cli::Cli(std::string program, std::string summary)
    : program_(std::move(program)), summary_(std::move(summary)) {
  flag("help", "print this help and exit");
}

Cli& Cli::option(const std::string& name, const std::string& help, const std::string& fallback) {
  order_.push_back(name);
  entries_[name] = {help, fallback, false};
  return *this;
}

Cli& Cli::flag(const std::string& name, const std::string& help) {
  order_.push_back(name);
  entries_[name] = {help, "", true};
  return *this;
}

Cli& Cli::repeated(const std::string& name, const std::string& help) {
  order_.push_back(name);
  entries_[name] = {help + " (may be given more than once)", "", false, true};
  return *this;
}

std::vector<std::string> Cli::getAll(const std::string& name) const {
  const auto it = all_values_.find(name);
  return it == all_values_.end() ? std::vector<std::string>{} : it->second;
}

Cli& Cli::positional(const std::string& name, const std::string& help) {
  positional_specs_.push_back({name, help});
  return *this;
}

std::string Cli::usage() const {
  std::string out = "usage: " + program_ + " [options]";
  // A command the program's name already shows ("vkgrad-gpt train") is not repeated.
  for (const auto& [name, help] : positional_specs_)
    if (!program_.ends_with(" " + name)) out += " " + name;
  out += "\n\n" + summary_ + "\n";
  if (!positional_specs_.empty()) out += "\narguments:\n";
  for (const auto& [name, help] : positional_specs_) out += "  " + name + "\n      " + help + "\n";
  out += "\noptions:\n";
  for (const std::string& name : order_) {
    const Entry& e = entries_.at(name);
    out += "  --" + name + (e.is_flag ? "" : " VALUE") + "\n      " + e.help;
    if (!e.fallback.empty()) out += " (default: " + e.fallback + ")";
    out += "\n";
  }
  return out;
}

void Cli::fail(const std::string& message) const {
  throw UsageError(program_ + ": " + message + "\n\n" + usage());
}

void Cli::parse(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      // A last positional named "NAME..." takes every argument left.
      const bool variadic =
          !positional_specs_.empty() && positional_specs_.back().first.ends_with("...");
      if (positional_values_.size() >= positional_specs_.size() && !variadic)
        fail("unexpected argument '" + arg + "'");
      positional_values_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
      inline_value = true;
    }
    auto it = entries_.find(name);
    if (it == entries_.end()) fail("unknown option '--" + name + "'");
    if (it->second.is_flag) {
      if (inline_value) fail("--" + name + " takes no value");
      values_[name] = "1";
      continue;
    }
    if (!inline_value) {
      if (i + 1 >= argc) fail("--" + name + " needs a value");
      value = argv[++i];
    }
    values_[name] = value;
    if (it->second.repeated) all_values_[name].push_back(value);
  }
  if (values_.count("help")) throw HelpRequested{usage()};
}

bool Cli::has(const std::string& name) const {
  if (values_.count(name)) return true;
  auto it = entries_.find(name);
  return it != entries_.end() && !it->second.is_flag && !it->second.fallback.empty();
}

bool Cli::isFlag(const std::string& name) const {
  const auto it = entries_.find(name);
  return it != entries_.end() && it->second.is_flag;
}

void Cli::set(const std::string& name, const std::string& value, const std::string& source) {
  if (!entries_.count(name)) throw std::logic_error("Cli::set: --" + name + " is not declared");
  values_[name] = value;
  if (!source.empty()) sources_[name] = source;
}

std::string Cli::origin(const std::string& name) const {
  const auto it = sources_.find(name);
  return it == sources_.end() ? "" : " (the value saved in " + it->second + ")";
}

std::string Cli::get(const std::string& name) const {
  if (auto it = values_.find(name); it != values_.end()) return it->second;
  auto it = entries_.find(name);
  return it == entries_.end() ? "" : it->second.fallback;
}

int64_t Cli::getInt(const std::string& name, int64_t min, int64_t max) const {
  const std::string text = get(name);
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno == ERANGE || value < min || value > max)
    fail("--" + name + " must be an integer in [" + std::to_string(min) + ", " +
         std::to_string(max) + "], got '" + text + "'" + origin(name));
  return value;
}

double Cli::getDouble(const std::string& name, double min, double max) const {
  const std::string text = get(name);
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno == ERANGE || !(value >= min && value <= max)) {
    char range[96];
    std::snprintf(range, sizeof(range), "[%g, %g]", min, max);
    fail("--" + name + " must be a number in " + range + ", got '" + text + "'" + origin(name));
  }
  return value;
}

}  // namespace vkgrad::apps
