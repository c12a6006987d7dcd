#include "vkgrad/gpt/vocab.h"

#include <algorithm>
#include <cstdio>

#include "vkgrad/core/error.h"

namespace vkgrad::gpt {

std::string describeByte(unsigned char byte) {
  if (byte >= 0x20 && byte < 0x7f) return std::string("'") + char(byte) + "'";
  char text[8];
  std::snprintf(text, sizeof(text), "\\x%02x", unsigned(byte));
  return text;
}

ByteVocab ByteVocab::fromText(std::string_view text) {
  if (text.empty()) throw Error("vocabulary: the text is empty");
  bool seen[256] = {};
  for (char c : text) seen[static_cast<unsigned char>(c)] = true;
  ByteVocab v;
  std::fill(std::begin(v.id_), std::end(v.id_), int16_t(-1));
  for (int b = 0; b < 256; ++b)
    if (seen[b]) {
      v.id_[b] = int16_t(v.bytes_.size());
      v.bytes_.push_back(static_cast<unsigned char>(b));
    }
  return v;
}

ByteVocab ByteVocab::fromJson(const graph::Json& bytes) {
  if (!bytes.is_array() || bytes.empty())
    throw Error("vocabulary: expected a non-empty array of byte values");
  ByteVocab v;
  std::fill(std::begin(v.id_), std::end(v.id_), int16_t(-1));
  for (const graph::Json& item : bytes) {
    const uint64_t b = graph::jsonUint(item, "vocabulary: a byte value", 255);
    if (!v.bytes_.empty() && b <= v.bytes_.back())
      throw Error("vocabulary: byte values must be strictly increasing");
    v.id_[b] = int16_t(v.bytes_.size());
    v.bytes_.push_back(static_cast<unsigned char>(b));
  }
  return v;
}

graph::Json ByteVocab::toJson() const {
  graph::Json bytes = graph::Json::array();
  for (unsigned char b : bytes_) bytes.push_back(b);
  return bytes;
}

std::vector<uint32_t> ByteVocab::encode(std::string_view text) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (id_[byte] < 0)
      throw Error("character " + describeByte(byte) + " at position " + std::to_string(i) +
                  " is not in the model's vocabulary (" + std::to_string(size()) +
                  " bytes seen in its training text)");
    ids.push_back(uint32_t(id_[byte]));
  }
  return ids;
}

std::string ByteVocab::decode(std::span<const uint32_t> ids) const {
  std::string text;
  text.reserve(ids.size());
  for (uint32_t id : ids) {
    if (id >= bytes_.size())
      throw Error("vocabulary: token id " + std::to_string(id) + " is outside the " +
                  std::to_string(size()) + " tokens");
    text.push_back(char(bytes_[id]));
  }
  return text;
}

}  // namespace vkgrad::gpt
