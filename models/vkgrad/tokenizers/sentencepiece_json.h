// The parts of tokenizer.json that make a BPE tokenizer SentencePiece-style (Llama 2's,
// TinyLlama's, Mistral's; metaspace.h): spaces written as '▁' by a normalizer (a Sequence of
// Prepend "▁" and Replace " " by "▁", older files) or by a Metaspace pre-tokenizer (prepend
// scheme "first", "always" or "never", split or not; newer files), never both; and a decoder
// that is a Sequence of Replace "▁" by " ", ByteFallback, Fuse and Strip " " from the start, or
// Metaspace. Any other normalizer, pre-tokenizer or decoder step is refused by name.
#pragma once

#include "vkgrad/tokenizers/json_reader.h"
#include "vkgrad/tokenizers/tokenizer.h"

namespace vkgrad::tokenizers {

// Whether the file's decoder (null when absent) is SentencePiece's kind rather than ByteLevel.
bool isSentencePiece(const Reader& r, const Json* decoder);
// The spaces and decoder of root (the file's top level), checked. Throws Error naming the
// member that vkgrad does not support.
SentencePiece readSentencePiece(const Reader& r, const Json& root);

}  // namespace vkgrad::tokenizers
