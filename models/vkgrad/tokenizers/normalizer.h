// The normalizer tokenizer.json may name: text rewritten before it is pre-tokenized. vkgrad
// has "NFC" (Qwen2's; Unicode canonical composition, "e" + U+0301 becomes "é", from ICU,
// Debian's libicu-dev), or none. Bytes that are not UTF-8 pass through unchanged: each valid
// stretch between them is normalized on its own. Normalizing is not undone by decoding, so
// only text already in NFC (most text is) round-trips exactly through a tokenizer that has it.
#pragma once

#include <string>
#include <string_view>

namespace vkgrad::tokenizers {

enum class Normalization { None, Nfc };

// text normalized; with None, or when nothing would change (ASCII, text already in NFC),
// text itself, copied.
std::string normalize(Normalization kind, std::string_view text);
// Whether normalize(kind, text) could differ from text: false for None and for ASCII.
bool mayNormalize(Normalization kind, std::string_view text);

}  // namespace vkgrad::tokenizers
