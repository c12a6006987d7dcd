#include "vkgrad/tokenizers/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>

#include <algorithm>
#include <optional>

#include "vkgrad/core/error.h"
#include "vkgrad/tokenizers/byte_level.h"

namespace vkgrad::tokenizers {
namespace {

const icu::Normalizer2& nfc() {
  static const icu::Normalizer2* instance = [] {
    UErrorCode status = U_ZERO_ERROR;
    const icu::Normalizer2* n = icu::Normalizer2::getNFCInstance(status);
    if (U_FAILURE(status) || !n)
      throw Error(std::string("ICU's NFC normalizer is unavailable: ") + u_errorName(status));
    return n;
  }();
  return *instance;
}

// One stretch of valid UTF-8 appended to out in NFC.
void appendNfc(std::string_view valid, std::string& out) {
  if (valid.empty()) return;
  const icu::StringPiece piece(valid.data(), int32_t(valid.size()));
  UErrorCode status = U_ZERO_ERROR;
  if (nfc().isNormalizedUTF8(piece, status) && U_SUCCESS(status)) {
    out.append(valid);
    return;
  }
  status = U_ZERO_ERROR;
  icu::StringByteSink<std::string> sink(&out);
  nfc().normalizeUTF8(0, piece, sink, nullptr, status);
  if (U_FAILURE(status))
    throw Error(std::string("NFC normalization failed: ") + u_errorName(status));
}

}  // namespace

bool mayNormalize(Normalization kind, std::string_view text) {
  return kind != Normalization::None &&
         std::any_of(text.begin(), text.end(), [](char c) { return uint8_t(c) >= 0x80; });
}

std::string normalize(Normalization kind, std::string_view text) {
  if (!mayNormalize(kind, text)) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t run = 0, pos = 0;  // text[run, pos) is valid UTF-8 not yet written
  while (pos < text.size()) {
    const size_t at = pos;
    if (nextCodePoint(text, pos)) continue;
    appendNfc(text.substr(run, at - run), out);
    out.push_back(text[at]);  // an invalid byte, kept as it is
    pos = run = at + 1;
  }
  appendNfc(text.substr(run), out);
  return out;
}

}  // namespace vkgrad::tokenizers
