// Writing a BPE tokenizer in Hugging Face's formats, for vocabularies made here
// (bpe_trainer.h): tokenizer.json as GPT-2's is laid out, and GPT-2's vocab.json and
// merges.txt. What these write, tokenizer_json.h and gpt2_files.h read back to the same ids.
#pragma once

#include <span>
#include <string>

#include "vkgrad/io/json_io.h"
#include "vkgrad/tokenizers/added_tokens.h"
#include "vkgrad/tokenizers/bpe.h"

namespace vkgrad::tokenizers {

// tokenizer.json's document: the BPE model, GPT-2's ByteLevel pre-tokenizer, decoder and
// post-processor, and the added tokens. Merges as "a b" strings, or with merges_as_pairs as
// ["a", "b"] as newer files write them. A caller may replace "pre_tokenizer" before writing.
// A spec with the Characters alphabet is written as Llama 2's SentencePiece-style file instead:
// the Prepend and Replace normalizer, no pre-tokenizer, the Replace, ByteFallback, Fuse, Strip
// decoder, <s> first where it is an added token, the model's byte_fallback, unk_token, fuse_unk.
graph::Json tokenizerJson(const BpeSpec& spec, std::span<const AddedToken> added,
                          bool merges_as_pairs = false);
// vocab.json's text: the vocabulary in id order.
std::string vocabJson(const BpeSpec& spec);
// merges.txt's text: "#version: 0.2", then one merge per line.
std::string mergesTxt(const BpeSpec& spec);

}  // namespace vkgrad::tokenizers
