// A strict RFC 8259 JSON parser for the tests of the apps: enough to prove an output is one
// valid JSON document and to look values up.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace vkgrad::test {

// Duplicate object keys are rejected too (our writer never emits them).
struct Json {
  enum Kind { Null, Bool, Number, String, Array, Object } kind = Null;
  bool boolean = false;
  double number = 0;
  std::string text;
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json& operator[](const std::string& key) const {
    for (const auto& [k, v] : members)
      if (k == key) return v;
    throw std::runtime_error("no member '" + key + "'");
  }
  bool has(const std::string& key) const {
    for (const auto& [k, v] : members)
      if (k == key) return true;
    return false;
  }
};

class JsonParser {
 public:
  static Json parse(std::string_view text) {
    JsonParser p(text);
    Json value = p.value();
    p.space();
    if (p.at_ != text.size()) p.fail("trailing characters");
    return value;
  }

 private:
  explicit JsonParser(std::string_view text) : s_(text) {}

  [[noreturn]] void fail(const std::string& why) const {
    throw std::runtime_error("invalid JSON at byte " + std::to_string(at_) + ": " + why);
  }
  void space() {
    while (at_ < s_.size() &&
           (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r'))
      ++at_;
  }
  char peek() const { return at_ < s_.size() ? s_[at_] : '\0'; }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++at_;
  }
  bool literal(std::string_view word) {
    if (s_.substr(at_, word.size()) != word) return false;
    at_ += word.size();
    return true;
  }
  bool digit() const { return peek() >= '0' && peek() <= '9'; }

  Json value() {
    space();
    Json v;
    const char c = peek();
    if (c == '{') {
      v.kind = Json::Object;
      ++at_;
      space();
      if (peek() == '}') return ++at_, v;
      for (;;) {
        space();
        std::string key = string();
        if (v.has(key)) fail("duplicate key '" + key + "'");
        space();
        expect(':');
        v.members.emplace_back(std::move(key), value());
        space();
        if (peek() == '}') return ++at_, v;
        expect(',');
      }
    }
    if (c == '[') {
      v.kind = Json::Array;
      ++at_;
      space();
      if (peek() == ']') return ++at_, v;
      for (;;) {
        v.items.push_back(value());
        space();
        if (peek() == ']') return ++at_, v;
        expect(',');
      }
    }
    if (c == '"') {
      v.kind = Json::String;
      v.text = string();
      return v;
    }
    if (literal("true")) return v.kind = Json::Bool, v.boolean = true, v;
    if (literal("false")) return v.kind = Json::Bool, v;
    if (literal("null")) return v;
    if (c == '-' || digit()) return number();
    fail("unexpected character");
  }

  Json number() {
    const size_t start = at_;
    if (peek() == '-') ++at_;
    if (peek() == '0') {
      ++at_;
    } else {
      if (!digit()) fail("digit expected");
      while (digit()) ++at_;
    }
    if (peek() == '.') {
      ++at_;
      if (!digit()) fail("digit expected after '.'");
      while (digit()) ++at_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++at_;
      if (peek() == '+' || peek() == '-') ++at_;
      if (!digit()) fail("digit expected in exponent");
      while (digit()) ++at_;
    }
    Json v;
    v.kind = Json::Number;
    v.number = std::stod(std::string(s_.substr(start, at_ - start)));
    return v;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (at_ >= s_.size()) fail("unterminated string");
      const char c = s_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("raw control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = peek();
      ++at_;
      switch (e) {
        case '"':
          out += '"';
          break;
        case '\\':
          out += '\\';
          break;
        case '/':
          out += '/';
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          uint32_t code = 0;
          for (int i = 0; i < 4; ++i, ++at_) {
            const char h = peek();
            code <<= 4;
            if (h >= '0' && h <= '9')
              code |= h - '0';
            else if (h >= 'a' && h <= 'f')
              code |= h - 'a' + 10;
            else if (h >= 'A' && h <= 'F')
              code |= h - 'A' + 10;
            else
              fail("bad \\u escape");
          }
          // Kept as one byte below 0x80, else a placeholder: the tests only read ASCII.
          out += code < 0x80 ? char(code) : '?';
          break;
        }
        default:
          fail("bad escape");
      }
    }
  }

  std::string_view s_;
  size_t at_ = 0;
};

}  // namespace vkgrad::test
