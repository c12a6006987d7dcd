#include "graph/json.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "vk/error.h"

namespace vkgrad::graph {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Json document() {
    Json v = value(0);
    space();
    if (at_ != s_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("JSON: " + what + " at byte " + std::to_string(at_));
  }
  void space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r'))
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

  Json value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than " + std::to_string(kMaxDepth));
    space();
    const char c = peek();
    if (c == '{') {
      ++at_;
      std::vector<std::pair<std::string, Json>> members;
      space();
      if (peek() == '}') return ++at_, Json::object();
      for (;;) {
        space();
        std::string key = string();
        for (const auto& [k, v] : members)
          if (k == key) fail("duplicate key \"" + key + "\"");
        space();
        expect(':');
        members.emplace_back(std::move(key), value(depth + 1));
        space();
        if (peek() == ',') {
          ++at_;
          continue;
        }
        expect('}');
        return Json::object(std::move(members));
      }
    }
    if (c == '[') {
      ++at_;
      std::vector<Json> items;
      space();
      if (peek() == ']') return ++at_, Json::array();
      for (;;) {
        items.push_back(value(depth + 1));
        space();
        if (peek() == ',') {
          ++at_;
          continue;
        }
        expect(']');
        return Json::array(std::move(items));
      }
    }
    if (c == '"') return Json::string(string());
    if (literal("true")) return Json::boolean(true);
    if (literal("false")) return Json::boolean(false);
    if (literal("null")) return Json();
    return number();
  }

  Json number() {
    const size_t start = at_;
    auto digits = [&] {
      const size_t from = at_;
      while (peek() >= '0' && peek() <= '9') ++at_;
      return at_ - from;
    };
    if (peek() == '-') ++at_;
    if (peek() == '0') {
      ++at_;
    } else if (digits() == 0) {
      fail("expected a value");
    }
    if (peek() == '.') {
      ++at_;
      if (digits() == 0) fail("expected digits after '.'");
    }
    if (peek() == 'e' || peek() == 'E') {
      ++at_;
      if (peek() == '+' || peek() == '-') ++at_;
      if (digits() == 0) fail("expected exponent digits");
    }
    const std::string text(s_.substr(start, at_ - start));
    return Json::number(std::strtod(text.c_str(), nullptr));
  }

  static void appendUtf8(std::string& out, uint32_t code) {
    if (code < 0x80) {
      out += char(code);
    } else if (code < 0x800) {
      out += char(0xc0 | (code >> 6)), out += char(0x80 | (code & 0x3f));
    } else if (code < 0x10000) {
      out += char(0xe0 | (code >> 12)), out += char(0x80 | ((code >> 6) & 0x3f));
      out += char(0x80 | (code & 0x3f));
    } else {
      out += char(0xf0 | (code >> 18)), out += char(0x80 | ((code >> 12) & 0x3f));
      out += char(0x80 | ((code >> 6) & 0x3f)), out += char(0x80 | (code & 0x3f));
    }
  }

  uint32_t hex4() {
    uint32_t code = 0;
    for (int i = 0; i < 4; ++i, ++at_) {
      const char h = peek();
      code <<= 4;
      if (h >= '0' && h <= '9') code |= uint32_t(h - '0');
      else if (h >= 'a' && h <= 'f') code |= uint32_t(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F') code |= uint32_t(h - 'A' + 10);
      else fail("bad \\u escape");
    }
    return code;
  }

  std::string string() {
    expect('"');
    std::string out;
    for (;;) {
      if (at_ >= s_.size()) fail("unterminated string");
      const char c = s_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      const char e = peek();
      ++at_;
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          uint32_t code = hex4();
          if (code >= 0xd800 && code < 0xdc00) {  // a surrogate pair
            if (!literal("\\u")) fail("unpaired surrogate");
            const uint32_t low = hex4();
            if (low < 0xdc00 || low >= 0xe000) fail("unpaired surrogate");
            code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
          } else if (code >= 0xdc00 && code < 0xe000) {
            fail("unpaired surrogate");
          }
          appendUtf8(out, code);
          break;
        }
        default: --at_, fail("bad escape");
      }
    }
  }

  std::string_view s_;
  size_t at_ = 0;
};

void dumpString(const std::string& text, std::string& out) {
  out += '"';
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\', out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", unsigned(c));
      out += escaped;
    } else {
      out += c;
    }
  }
  out += '"';
}

void dumpValue(const Json& v, std::string& out) {
  switch (v.kind()) {
    case Json::Kind::Null: out += "null"; break;
    case Json::Kind::Bool: out += v.asBool() ? "true" : "false"; break;
    case Json::Kind::Number: {
      const double x = v.asNumber();
      if (!std::isfinite(x)) throw Error("JSON: cannot write a non-finite number");
      char text[32];
      if (x == std::floor(x) && std::fabs(x) < 9.007199254740992e15)
        std::snprintf(text, sizeof(text), "%.0f", x);
      else
        std::snprintf(text, sizeof(text), "%.17g", x);
      out += text;
      break;
    }
    case Json::Kind::String: dumpString(v.asString(), out); break;
    case Json::Kind::Array: {
      out += '[';
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += ',';
        dumpValue(v.items()[i], out);
      }
      out += ']';
      break;
    }
    case Json::Kind::Object: {
      out += '{';
      for (size_t i = 0; i < v.members().size(); ++i) {
        if (i) out += ',';
        dumpString(v.members()[i].first, out);
        out += ':';
        dumpValue(v.members()[i].second, out);
      }
      out += '}';
      break;
    }
  }
}

[[noreturn]] void wrongKind(Json::Kind want, Json::Kind got) {
  throw Error(std::string("JSON: expected ") + jsonKindName(want) + ", got " + jsonKindName(got));
}

}  // namespace

const char* jsonKindName(Json::Kind kind) {
  switch (kind) {
    case Json::Kind::Null: return "null";
    case Json::Kind::Bool: return "a boolean";
    case Json::Kind::Number: return "a number";
    case Json::Kind::String: return "a string";
    case Json::Kind::Array: return "an array";
    case Json::Kind::Object: return "an object";
  }
  return "?";
}

Json Json::boolean(bool value) {
  Json j;
  j.kind_ = Kind::Bool, j.bool_ = value;
  return j;
}
Json Json::number(double value) {
  Json j;
  j.kind_ = Kind::Number, j.number_ = value;
  return j;
}
Json Json::string(std::string value) {
  Json j;
  j.kind_ = Kind::String, j.string_ = std::move(value);
  return j;
}
Json Json::array(std::vector<Json> items) {
  Json j;
  j.kind_ = Kind::Array, j.items_ = std::move(items);
  return j;
}
Json Json::object(std::vector<std::pair<std::string, Json>> members) {
  Json j;
  j.kind_ = Kind::Object, j.members_ = std::move(members);
  return j;
}

Json Json::parse(std::string_view text) { return Parser(text).document(); }

std::string Json::dump() const {
  std::string out;
  dumpValue(*this, out);
  return out;
}

bool Json::asBool() const {
  if (kind_ != Kind::Bool) wrongKind(Kind::Bool, kind_);
  return bool_;
}
double Json::asNumber() const {
  if (kind_ != Kind::Number) wrongKind(Kind::Number, kind_);
  return number_;
}
uint64_t Json::asUint() const {
  const double x = asNumber();
  if (!(x >= 0 && x <= 9007199254740992.0 && x == std::floor(x)))
    throw Error("JSON: expected a non-negative integer, got " + dump());
  return uint64_t(x);
}
const std::string& Json::asString() const {
  if (kind_ != Kind::String) wrongKind(Kind::String, kind_);
  return string_;
}
const std::vector<Json>& Json::items() const {
  if (kind_ != Kind::Array) wrongKind(Kind::Array, kind_);
  return items_;
}
const std::vector<std::pair<std::string, Json>>& Json::members() const {
  if (kind_ != Kind::Object) wrongKind(Kind::Object, kind_);
  return members_;
}
const Json* Json::find(std::string_view key) const {
  if (kind_ != Kind::Object) return nullptr;
  for (const auto& [k, v] : members_)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace vkgrad::graph
