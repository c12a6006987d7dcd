// vkgrad-info as a user runs it: valid JSON that names the device the engine picks,
// readable text, and clear failures (bad VKGRAD_DEVICE, bad options) without crashes.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "apps/run_app.h"
#include "common/vk_test.h"
#include "vk/device_info.h"

namespace vkgrad::test {
namespace {

// A strict RFC 8259 parser: enough to prove the output is one valid JSON document and
// to look values up. Duplicate object keys are rejected too (our writer never emits them).
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

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(JsonParser, AcceptsValidAndRejectsInvalidDocuments) {
  const Json doc = JsonParser::parse(
      R"( {"a": [1, -2.5e3, 0, true, false, null], "b": {"c": "x\"\\\/\n\u0041"}, "d": []} )");
  EXPECT_EQ(doc["a"].items.size(), 6u);
  EXPECT_EQ(doc["a"].items[1].number, -2500.0);
  EXPECT_EQ(doc["b"]["c"].text, "x\"\\/\nA");
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "{'a':1}", "01", "1.", "-", "[1] [2]",
                          "\"tab\there\"", "\"\\x\"", "{\"a\":1,\"a\":2}", "nan", "[inf]", "tru"})
    EXPECT_THROW(JsonParser::parse(bad), std::runtime_error) << bad;
}

class InfoAppTest : public VkTest {};

TEST_F(InfoAppTest, JsonIsValidAndNamesTheDevice) {
  const AppRun run = runApp("info", {"--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Json doc;
  ASSERT_NO_THROW(doc = JsonParser::parse(run.out)) << run.out;
  ASSERT_EQ(doc.kind, Json::Object);
  const Json& devices = doc["devices"];
  ASSERT_EQ(devices.kind, Json::Array);
  EXPECT_EQ(devices.items.size(), vk::listDevices().size());
  // The device it marks is the one a Context picks with the same environment.
  const Json& chosen = doc["default_device"];
  const Json& selected = devices.items.at(size_t(chosen["index"].number));
  EXPECT_EQ(selected["name"].text, ctx().info().name);
  EXPECT_EQ(selected["index"].number, ctx().info().index);
  EXPECT_TRUE(selected["default"].boolean);
  EXPECT_EQ(selected["subgroup"]["size"].number, ctx().info().subgroup_size);
  EXPECT_EQ(selected["max_storage_buffer_range_bytes"].number,
            double(ctx().info().max_storage_buffer_range));
  EXPECT_EQ(selected["type"].text, vk::deviceTypeName(ctx().info().type));
  EXPECT_EQ(selected["compute_queue"]["family"].number, ctx().info().compute_family);
  int defaults = 0;
  for (const Json& d : devices.items) {
    for (const char* key : {"name", "type", "driver_name", "driver_info", "api_version"})
      EXPECT_EQ(d[key].kind, Json::String) << key;
    for (const char* key : {"index", "vendor_id", "device_id", "max_shared_memory_bytes",
                            "max_workgroup_invocations", "max_storage_buffer_range_bytes",
                            "max_texel_buffer_elements", "max_push_constants_bytes"})
      EXPECT_EQ(d[key].kind, Json::Number) << key;
    for (const char* key : {"compute", "shuffle", "arithmetic"})
      EXPECT_EQ(d["subgroup"][key].kind, Json::Bool) << key;
    for (const char* key : {"fp16", "int8", "fp64", "int64", "storage_16bit", "storage_8bit"})
      EXPECT_EQ(d["features"][key].kind, Json::Bool) << key;
    EXPECT_EQ(d["timestamps"]["supported"].kind, Json::Bool);
    EXPECT_EQ(d["compute_queue"]["present"].kind, Json::Bool);
    EXPECT_EQ(d["max_workgroup_size"].items.size(), 3u);
    ASSERT_FALSE(d["memory_heaps"].items.empty());
    EXPECT_EQ(d["memory_heaps"].items[0]["bytes"].kind, Json::Number);
    EXPECT_EQ(d["memory_heaps"].items[0]["device_local"].kind, Json::Bool);
    defaults += d["default"].boolean;
  }
  EXPECT_EQ(defaults, 1);
}

TEST_F(InfoAppTest, TextMarksTheDefaultDevice) {
  const AppRun run = runApp("info", {});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const vk::DeviceInfo& info = ctx().info();
  EXPECT_TRUE(contains(run.out, "* " + std::to_string(info.index) + ": " + info.name)) << run.out;
  EXPECT_TRUE(contains(run.out, "subgroup")) << run.out;
  EXPECT_TRUE(run.err.empty()) << run.err;
}

TEST_F(InfoAppTest, DeviceOptionAndVariableSetTheMark) {
  const vk::DeviceInfo& info = ctx().info();
  const std::string index = std::to_string(info.index);
  // --device wins over VKGRAD_DEVICE.
  for (const std::string& env : {info.name, std::string("no-such-device"), std::string()}) {
    const AppRun run = runApp("info", {"--json", "--device", index}, {{"VKGRAD_DEVICE", env}});
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const Json chosen = JsonParser::parse(run.out)["default_device"];
    EXPECT_EQ(chosen["index"].number, info.index);
    EXPECT_EQ(chosen["source"].text, "--device");
    EXPECT_EQ(chosen["selector"].text, index);
  }
  const AppRun by_env = runApp("info", {"--json"}, {{"VKGRAD_DEVICE", info.name}});
  ASSERT_EQ(by_env.exit_code, 0) << by_env.err;
  const Json chosen = JsonParser::parse(by_env.out)["default_device"];
  EXPECT_EQ(chosen["index"].number, info.index);
  EXPECT_EQ(chosen["source"].text, "VKGRAD_DEVICE");
  EXPECT_EQ(chosen["selector"].text, info.name);
}

TEST(InfoApp, UnknownDeviceFailsListingTheDevices) {
  for (const auto& [args, env] :
       {std::pair<std::vector<std::string>, std::string>{{}, "no-such-device"},
        std::pair<std::vector<std::string>, std::string>{{"--json", "--device", "no-such-device"},
                                                         ""}}) {
    const AppRun run = runApp("info", args, {{"VKGRAD_DEVICE", env}});
    EXPECT_EQ(run.exit_code, 1) << run.err;
    EXPECT_TRUE(contains(run.err, "'no-such-device' matches no Vulkan device")) << run.err;
    for (const vk::DeviceInfo& d : vk::listDevices())
      EXPECT_TRUE(contains(run.err, std::to_string(d.index) + ": " + d.name)) << run.err;
    EXPECT_TRUE(run.out.empty()) << run.out;
  }
}

TEST(InfoApp, HelpExitsZeroAndUnknownOptionsExitTwo) {
  const AppRun help = runApp("info", {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "usage: vkgrad-info")) << help.out;
  EXPECT_TRUE(contains(help.out, "--json")) << help.out;
  const AppRun bad = runApp("info", {"--no-such-option"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "unknown option '--no-such-option'")) << bad.err;
  const AppRun stray = runApp("info", {"stray"});
  EXPECT_EQ(stray.exit_code, 2);
}

}  // namespace
}  // namespace vkgrad::test
