#include "vkgrad/io/json_io.h"

#include <bit>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/io/atomic_file.h"
#include "vkgrad/io/bundle.h"
#include "vkgrad/io/input_file.h"

namespace vkgrad::graph {
namespace {

// Far deeper than anything vkgrad writes (3 levels), shallow enough that no document is
// expensive to hold.
constexpr int kMaxDepth = 64;

// A bound as people write it: 2^31 rather than 2147483648.
std::string bound(uint64_t max) {
  if (max > 1024 && (max & (max - 1)) == 0) return "2^" + std::to_string(std::countr_zero(max));
  return std::to_string(max);
}

// parseJson into either nlohmann type.
template <class J>
J parseAs(std::string_view text, const std::string& where) {
  // nlohmann keeps the last of two equal keys and nests without limit; the parser's callback
  // sees every key and every opening bracket in document order, so it can refuse both.
  std::vector<std::set<std::string>> keys;  // one set per object being read
  auto check = [&](int depth, typename J::parse_event_t event, J& parsed) {
    if (event == J::parse_event_t::object_start || event == J::parse_event_t::array_start) {
      if (depth >= kMaxDepth)
        throw Error(where + ": invalid JSON: nesting deeper than " + std::to_string(kMaxDepth));
      if (event == J::parse_event_t::object_start) keys.emplace_back();
    } else if (event == J::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == J::parse_event_t::key) {
      const std::string& key = parsed.template get_ref<const std::string&>();
      if (!keys.back().insert(key).second)
        throw Error(where + ": invalid JSON: key \"" + key + "\" twice in one object");
    }
    return true;
  };
  try {
    return J::parse(text, check);
  } catch (const typename J::exception& e) {
    throw Error(where + ": invalid JSON: " + e.what());
  }
}

}  // namespace

Json parseJson(std::string_view text, const std::string& where) {
  return parseAs<Json>(text, where);
}

nlohmann::json parseJsonMapped(std::string_view text, const std::string& where) {
  return parseAs<nlohmann::json>(text, where);
}

std::string dumpJson(const Json& value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

uint64_t jsonUint(const Json& value, std::string_view what, uint64_t max) {
  bool ok = false;
  uint64_t n = 0;
  if (value.is_number_unsigned()) {
    n = value.get<uint64_t>();
    ok = true;
  } else if (value.is_number_integer()) {  // signed: negative as read, either sign if built
    const int64_t i = value.get<int64_t>();
    ok = i >= 0;
    n = uint64_t(i);
  } else if (value.is_number_float()) {
    const double x = value.get<double>();
    ok = x >= 0 && x <= 9007199254740992.0 && x == std::floor(x);
    n = ok ? uint64_t(x) : 0;
  }
  if (!ok || n > max)
    throw Error(std::string(what) + " must be an integer in [0, " + std::to_string(max) +
                "], got " + dumpJson(value));
  return n;
}

Json readJsonFile(const std::filesystem::path& path) {
  return parseJson(readInputFile(path, "a JSON file", uint64_t(64) << 20), path.string());
}

Json readCheckpointFile(const std::filesystem::path& dir, const std::string& file,
                        const std::string& format) {
  if (!std::filesystem::is_directory(dir))
    throw Error(dir.string() + ": no such checkpoint directory");
  checkBundle(dir);  // a save that a crash interrupted is settled; a mix of saves refused
  const std::filesystem::path path = dir / file;
  if (!std::filesystem::exists(path))
    throw Error(path.string() + ": missing (is this a " + format + " checkpoint directory?)");
  return readJsonFile(path);
}

void writeCheckpointFile(const std::filesystem::path& dir, const std::string& file,
                         const std::string& format, uint64_t version, const Json& model,
                         const Json& training, const Json& sections) {
  Json root = {{"format", format}, {"version", version}, {"model", model}};
  for (const auto& [key, value] : sections.items()) root[key] = value;
  root["training"] = training;
  writeFileAtomically(dir / file, dumpJson(root) + "\n");
}

std::vector<std::string> jsonStrings(const Json& object, const std::string& key, size_t count) {
  const Json& array = jsonMember(object, key);
  const std::string want =
      "\"" + key + "\" must be an array of " + std::to_string(count) + " strings";
  if (!array.is_array() || array.size() != count) throw Error(want);
  std::vector<std::string> out;
  for (const Json& s : array) {
    if (!s.is_string()) throw Error(want);
    out.push_back(s.get<std::string>());
  }
  return out;
}

const Json& jsonMember(const Json& object, const std::string& key) {
  const auto it = object.find(key);
  if (it == object.end()) throw Error("missing \"" + key + "\"");
  return *it;
}

const Json& jsonObject(const Json& parent, const std::string& key) {
  const Json& v = jsonMember(parent, key);
  if (!v.is_object()) throw Error("\"" + key + "\" must be an object, got " + dumpJson(v));
  return v;
}

std::string jsonString(const Json& object, const std::string& key) {
  const Json& v = jsonMember(object, key);
  if (!v.is_string()) throw Error("\"" + key + "\" must be a string, got " + dumpJson(v));
  return v.get<std::string>();
}

bool jsonBool(const Json& object, const std::string& key) {
  const Json& v = jsonMember(object, key);
  if (!v.is_boolean()) throw Error("\"" + key + "\" must be true or false, got " + dumpJson(v));
  return v.get<bool>();
}

double jsonNumber(const Json& object, const std::string& key) {
  const Json& v = jsonMember(object, key);
  if (!v.is_number()) throw Error("\"" + key + "\" must be a number, got " + dumpJson(v));
  return v.get<double>();
}

void jsonCheckFormat(const Json& root, const std::string& format, uint64_t version) {
  if (!root.is_object()) throw Error("not a JSON object");
  if (jsonString(root, "format") != format) throw Error("format is not \"" + format + "\"");
  const uint64_t v = jsonUint(jsonMember(root, "version"), "\"version\"");
  if (v != version)
    throw Error("version " + std::to_string(v) + " is not supported (this build reads version " +
                std::to_string(version) + ")");
}

int64_t jsonPositive(const Json& object, const std::string& key, int64_t max) {
  const uint64_t v = jsonUint(jsonMember(object, key), "\"" + key + "\"");
  if (v == 0 || v > uint64_t(max))
    throw Error("\"" + key + "\" must be in [1, " + bound(uint64_t(max)) + "], got " +
                std::to_string(v));
  return int64_t(v);
}

}  // namespace vkgrad::graph
