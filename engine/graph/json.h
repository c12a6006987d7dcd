// A small JSON value with a strict RFC 8259 parser and a writer: what checkpoint headers and
// other small metadata need. Objects keep their keys in order; duplicate keys are an error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace vkgrad::graph {

class Json {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Json() = default;
  static Json boolean(bool value);
  static Json number(double value);
  static Json string(std::string value);
  static Json array(std::vector<Json> items = {});
  static Json object(std::vector<std::pair<std::string, Json>> members = {});

  // Throws vkgrad::Error "JSON: <what> at byte N" for anything that is not exactly one valid
  // document (surrounding whitespace allowed). Nesting deeper than 64 is rejected too.
  static Json parse(std::string_view text);
  std::string dump() const;  // compact; numbers that are integers print without a fraction

  Kind kind() const { return kind_; }
  bool asBool() const;
  double asNumber() const;
  // The number as an integer in [0, 2^53]; throws if it is not one.
  uint64_t asUint() const;
  const std::string& asString() const;
  const std::vector<Json>& items() const;
  const std::vector<std::pair<std::string, Json>>& members() const;
  const Json* find(std::string_view key) const;  // null if absent (or not an object)

 private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  double number_ = 0;
  std::string string_;
  std::vector<Json> items_;
  std::vector<std::pair<std::string, Json>> members_;
};

const char* jsonKindName(Json::Kind kind);

}  // namespace vkgrad::graph
