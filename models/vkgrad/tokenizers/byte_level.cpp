#include "vkgrad/tokenizers/byte_level.h"

#include <array>

namespace vkgrad::tokenizers {
namespace {

bool printable(uint8_t b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

// 256 printable bytes stand for themselves and 68 others take U+0100..U+0143.
constexpr char32_t kEnd = 0x100 + 68;

struct Alphabet {
  std::array<char32_t, 256> code{};  // byte -> code point
  std::array<int16_t, kEnd> byte{};  // code point -> byte, or -1
  Alphabet() {
    byte.fill(-1);
    char32_t next = 0x100;
    for (int b = 0; b < 256; ++b) {
      code[b] = printable(uint8_t(b)) ? char32_t(b) : next++;
      byte[code[b]] = int16_t(b);
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

char32_t byteToCodePoint(uint8_t b) {
  return alphabet().code[b];
}

std::optional<uint8_t> codePointToByte(char32_t c) {
  if (c >= kEnd || alphabet().byte[c] < 0) return std::nullopt;
  return uint8_t(alphabet().byte[c]);
}

std::string toByteLevel(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (const char ch : bytes) appendUtf8(out, byteToCodePoint(uint8_t(ch)));
  return out;
}

std::optional<std::string> fromByteLevel(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const std::optional<char32_t> c = nextCodePoint(text, pos);
    if (!c) return std::nullopt;
    const std::optional<uint8_t> b = codePointToByte(*c);
    if (!b) return std::nullopt;
    out.push_back(char(*b));
  }
  return out;
}

std::optional<char32_t> nextCodePoint(std::string_view text, size_t& pos) {
  const auto byte = [&](size_t i) { return uint8_t(text[i]); };
  const uint8_t lead = byte(pos);
  int length = 0;
  char32_t c = 0;
  if (lead < 0x80) {
    ++pos;
    return lead;
  } else if ((lead & 0xE0) == 0xC0) {
    length = 2, c = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, c = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, c = lead & 0x07;
  } else {
    return std::nullopt;
  }
  if (pos + length > text.size()) return std::nullopt;
  for (int i = 1; i < length; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return std::nullopt;
    c = (c << 6) | (byte(pos + i) & 0x3F);
  }
  // The shortest form only (no overlong encodings), no surrogates, nothing past U+10FFFF.
  static constexpr char32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (c < kMin[length] || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return std::nullopt;
  pos += length;
  return c;
}

void appendUtf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(char(c));
  } else if (c < 0x800) {
    out.push_back(char(0xC0 | (c >> 6)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(char(0xE0 | (c >> 12)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  } else {
    out.push_back(char(0xF0 | (c >> 18)));
    out.push_back(char(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(char(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(char(0x80 | (c & 0x3F)));
  }
}

}  // namespace vkgrad::tokenizers
