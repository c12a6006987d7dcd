// Hugging Face's tokenizer.json, for the byte-level BPE tokenizers vkgrad runs: a "BPE" model,
// a "ByteLevel" decoder, and a pre-tokenizer that ends in "ByteLevel" (alone as GPT-2's, or
// after a "Split" by a regex as Llama 3's and Qwen2's, or "Digits" as SmolLM2's), with no
// normalizer or "NFC" (Qwen2's). Merges may be strings "a b" or, in newer files, pairs
// ["a", "b"].
//
// What vkgrad does not do is refused by name rather than run differently: another model type
// (WordPiece, Unigram, WordLevel), another normalizer (Lowercase, NFKC, Llama 2's Prepend and
// Replace, ...), another pre-tokenizer or
// decoder, a Split behaviour other than "Isolated", BPE dropout or byte fallback, truncation,
// and added tokens that strip white space or match single words only. A TemplateProcessing
// post-processor (the tokens a model puts around a text, such as Llama 3's <|begin_of_text|>)
// becomes the tokenizer's template(): encode gives the text's tokens alone.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "vkgrad/tokenizers/tokenizer.h"

namespace vkgrad::tokenizers {

// The file read and parsed. Throws Error "<path>: ..." when it cannot be read, is not JSON,
// or describes what vkgrad does not support (named).
Tokenizer readTokenizerJson(const std::filesystem::path& path);
// The same for the file's text; `where` names it in errors.
Tokenizer parseTokenizerJson(std::string_view text, const std::string& where);

}  // namespace vkgrad::tokenizers
