// GPT-2's byte-level alphabet: every byte value stands for one printable Unicode code point, so
// a vocabulary of byte strings can be written as JSON text. Bytes that are printable Latin-1
// ('!'..'~', '¡'..'¬', '®'..'ÿ') stand for themselves; the other 68 (controls, space, DEL,
// U+00A0, U+00AD) take U+0100, U+0101, ... in byte order, so space is 'Ġ' (U+0120).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace vkgrad::tokenizers {

// The code point that stands for byte b.
char32_t byteToCodePoint(uint8_t b);
// The byte code point c stands for, or nullopt when c is outside the alphabet.
std::optional<uint8_t> codePointToByte(char32_t c);

// bytes written in the alphabet, as UTF-8 (a vocabulary entry as tokenizer.json holds it).
std::string toByteLevel(std::string_view bytes);
// The bytes that text (UTF-8 in the alphabet) stands for, or nullopt when text is not valid
// UTF-8 or holds a character outside the alphabet.
std::optional<std::string> fromByteLevel(std::string_view text);

// The next code point of UTF-8 text at pos, advancing pos; nullopt (pos unchanged) on an
// invalid, overlong or truncated sequence or a surrogate.
std::optional<char32_t> nextCodePoint(std::string_view text, size_t& pos);
// c as UTF-8 appended to out.
void appendUtf8(std::string& out, char32_t c);

}  // namespace vkgrad::tokenizers
