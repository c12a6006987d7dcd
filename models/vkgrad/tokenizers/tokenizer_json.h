// Hugging Face's tokenizer.json, for the BPE tokenizers vkgrad runs. Byte-level ones: a "BPE"
// model, a "ByteLevel" decoder, and a pre-tokenizer that ends in "ByteLevel" (alone as GPT-2's,
// or after a "Split" by a regex as Llama 3's and Qwen2's, or "Digits" as SmolLM2's), with no
// normalizer or "NFC" (Qwen2's). SentencePiece-style ones (Llama 2's, TinyLlama's, Mistral's;
// their decoder a Sequence or Metaspace): a "BPE" model over characters with byte_fallback or
// an unk_token, spaces as '▁' (sentencepiece_json.h). Merges may be strings "a b" or, in newer
// files, pairs ["a", "b"].
//
// What vkgrad does not do is refused by name rather than run differently: another model type
// (WordPiece, Unigram, WordLevel), another normalizer (Lowercase, NFKC, ...), another
// pre-tokenizer or decoder, a Split behaviour other than "Isolated", BPE dropout, byte fallback
// with a ByteLevel decoder, truncation, and added tokens that strip white space or match single
// words only. A TemplateProcessing post-processor (the tokens a model puts around a text, such
// as Llama 3's <|begin_of_text|> or Llama 2's <s>) becomes the tokenizer's postTemplate():
// encode gives the text's tokens alone, encodeWithTemplate the template's around them.
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
