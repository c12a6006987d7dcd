// A byte-level vocabulary built from a text: one token per distinct byte of the text, in
// byte order. For ASCII text it is a character-level vocabulary; multi-byte UTF-8 characters
// become several tokens, so any file works and decoding never loses a byte.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "vkgrad/io/json_io.h"

namespace vkgrad::gpt {

class ByteVocab {
 public:
  // The distinct bytes of text. Throws Error when text is empty.
  static ByteVocab fromText(std::string_view text);
  // From a saved list of byte values (toJson); throws Error on a malformed list.
  static ByteVocab fromJson(const graph::Json& bytes);
  graph::Json toJson() const;

  int64_t size() const { return int64_t(bytes_.size()); }
  bool contains(unsigned char byte) const { return id_[byte] >= 0; }
  // Throws Error naming the first byte outside the vocabulary and its position.
  std::vector<uint32_t> encode(std::string_view text) const;
  // Throws Error on an id >= size().
  std::string decode(std::span<const uint32_t> ids) const;
  std::string decode(uint32_t id) const { return decode(std::span<const uint32_t>(&id, 1)); }

 private:
  std::vector<unsigned char> bytes_;  // id -> byte
  int16_t id_[256];                   // byte -> id, or -1
};

// A byte as text for messages: 'a', or \xNN for control and non-ASCII bytes.
std::string describeByte(unsigned char byte);

}  // namespace vkgrad::gpt
