#include "graph/json_io.h"

#include <cmath>
#include <set>
#include <vector>

#include "vk/error.h"

namespace vkgrad::graph {
namespace {

// Far deeper than anything vkgrad writes (3 levels), shallow enough that no document is
// expensive to hold.
constexpr int kMaxDepth = 64;

}  // namespace

Json parseJson(std::string_view text, const std::string& where) {
  // nlohmann keeps the last of two equal keys and nests without limit; the parser's callback
  // sees every key and every opening bracket in document order, so it can refuse both.
  std::vector<std::set<std::string>> keys;  // one set per object being read
  auto check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) {
      if (depth >= kMaxDepth)
        throw Error(where + ": invalid JSON: nesting deeper than " + std::to_string(kMaxDepth));
      if (event == Json::parse_event_t::object_start) keys.emplace_back();
    } else if (event == Json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == Json::parse_event_t::key) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys.back().insert(key).second)
        throw Error(where + ": invalid JSON: key \"" + key + "\" twice in one object");
    }
    return true;
  };
  try {
    return Json::parse(text, check);
  } catch (const Json::exception& e) {
    throw Error(where + ": invalid JSON: " + e.what());
  }
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

}  // namespace vkgrad::graph
