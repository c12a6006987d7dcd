#include "common/json_text.h"

#include <cstdint>
#include <cstdio>

namespace vkgrad::apps {
namespace {

// Length of the well-formed UTF-8 sequence at text[i] (a byte >= 0x80), else 0.
size_t utf8Length(const std::string& text, size_t i) {
  const unsigned char c = static_cast<unsigned char>(text[i]);
  size_t n;
  uint32_t code;
  if (c >= 0xc2 && c <= 0xdf)
    n = 2, code = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef)
    n = 3, code = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4)
    n = 4, code = c & 0x07;
  else
    return 0;
  if (i + n > text.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const unsigned char cc = static_cast<unsigned char>(text[i + k]);
    if ((cc & 0xc0) != 0x80) return 0;
    code = (code << 6) | (cc & 0x3f);
  }
  // Overlong forms, UTF-16 surrogates and code points past U+10FFFF are not UTF-8.
  const uint32_t min_code[] = {0, 0, 0x80, 0x800, 0x10000};
  if (code < min_code[n] || (code >= 0xd800 && code <= 0xdfff) || code > 0x10ffff) return 0;
  return n;
}

}  // namespace

std::string jsonQuote(const std::string& text) {
  std::string out = "\"";
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof(escaped), "\\u%04x", c);
      out += escaped;
    } else if (c >= 0x80) {
      const size_t n = utf8Length(text, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text, i, n);
        i += n;
      }
      continue;
    } else {
      out += char(c);
    }
    ++i;
  }
  return out + "\"";
}

}  // namespace vkgrad::apps
