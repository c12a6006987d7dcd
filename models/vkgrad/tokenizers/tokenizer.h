// A BPE tokenizer, byte-level as GPT-2, Llama 3, Qwen2 and SmolLM2 use it, or SentencePiece-
// style as Llama 2, TinyLlama and Mistral do: added tokens found first, the rest of the text
// normalized (Qwen2's NFC, or not at all), cut into words by the pre-tokenizer (SentencePiece's
// '▁' for spaces, metaspace.h), each word encoded by BPE; decoding joins the tokens' bytes.
// Any bytes round-trip exactly, invalid UTF-8 included: every byte has a token (byte-level, or
// SentencePiece's byte fallback), and decode returns bytes, not text (with NFC, any bytes whose
// valid stretches are already in NFC; SentencePiece-style, bytes with no '▁' in them, and with
// a "first" Metaspace none that start with a space, which decoding strips).
//
// Read from a Hugging Face folder (tokenizer.json, or GPT-2's vocab.json and merges.txt) by
// loadTokenizer; tokenizer_json.h and gpt2_files.h read each format alone. encode and decode
// may be called from several threads at once.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "vkgrad/tokenizers/added_tokens.h"
#include "vkgrad/tokenizers/bpe.h"
#include "vkgrad/tokenizers/metaspace.h"
#include "vkgrad/tokenizers/normalizer.h"
#include "vkgrad/tokenizers/pre_tokenizer.h"

namespace vkgrad::tokenizers {

// The ids a model's template puts around one encoded text (Llama 3's <|begin_of_text|> and
// Llama 2's <s> before it); empty for GPT-2, Qwen2 and SmolLM2.
struct Template {
  std::vector<uint32_t> prefix, suffix;
};

// A SentencePiece-style tokenizer's spaces and decoder (metaspace.h); its BPE has the
// Characters alphabet.
struct SentencePiece {
  Metaspace metaspace;
  PieceDecoder decoder;
};

class Tokenizer {
 public:
  // Throws Error "<where>: ..." as Bpe and AddedTokens do.
  Tokenizer(const BpeSpec& bpe, PreTokenizer pre_tokenizer, std::vector<AddedToken> added,
            const std::string& where, Normalization normalization = Normalization::None);

  // The ids of text (any bytes). With special = false, special added tokens written in the
  // text are encoded as the text they are (a user's text cannot inject "<|endoftext|>").
  std::vector<uint32_t> encode(std::string_view text, bool special = true) const;
  // The ids of text as the model saw texts in training: postTemplate()'s prefix, encode(text),
  // then its suffix unless `open` (a prompt to continue takes no end-of-text).
  std::vector<uint32_t> encodeWithTemplate(std::string_view text, bool open = false) const;
  // The bytes ids stand for, special tokens' text included unless skip_special. Throws Error
  // "token id N is not in the vocabulary (M ids)" for an id neither BPE nor an added token has.
  // `continuation`: the ids continue a decoded text, so a SentencePiece-style decoder strips
  // no leading space (a sampled "▁world" after "Hello" is " world").
  std::string decode(std::span<const uint32_t> ids, bool skip_special = false,
                     bool continuation = false) const;

  // One past the largest id, added tokens included.
  uint32_t size() const { return size_; }
  // The id of a token given as the files write it ("<|endoftext|>", "Ġthe"), or -1.
  int64_t tokenId(std::string_view text) const;
  const std::vector<AddedToken>& addedTokens() const { return added_.tokens(); }
  bool isAddedToken(uint32_t id) const { return added_by_id_.count(id) > 0; }
  const Bpe& bpe() const { return bpe_; }
  const PreTokenizer& preTokenizer() const { return pre_tokenizer_; }
  Normalization normalization() const { return normalization_; }
  const Template& postTemplate() const { return template_; }
  void setTemplate(Template t) { template_ = std::move(t); }
  // Set: the tokenizer is SentencePiece-style (bpe().alphabet() must be Characters).
  const std::optional<SentencePiece>& sentencePiece() const { return sentence_piece_; }
  void setSentencePiece(SentencePiece s);
  // Whether SentencePiece-style text is encoded word by word through the word cache (split, or
  // no token has a '▁' after another character: spacesLeadOnly in metaspace.h).
  bool encodesWords() const { return metaspace_words_; }

 private:
  // text: the stretch between two added tokens; first: it starts the encoded text.
  void encodeText(std::string_view text, bool first, std::vector<uint32_t>& out) const;

  Bpe bpe_;
  PreTokenizer pre_tokenizer_;
  AddedTokens added_;
  Normalization normalization_ = Normalization::None;
  Template template_;
  std::optional<SentencePiece> sentence_piece_;
  // Unsplit text may be encoded word by word all the same (spacesLeadOnly in metaspace.h).
  bool metaspace_words_ = false;
  std::unordered_map<uint32_t, size_t> added_by_id_;  // id -> index in added_.tokens()
  uint32_t size_ = 0;
};

// The tokenizer of a Hugging Face model folder: DIR/tokenizer.json where it exists, else
// DIR/vocab.json with DIR/merges.txt (GPT-2's files). Throws Error naming the folder when it
// holds neither, or the file that does not parse or that vkgrad does not support.
Tokenizer loadTokenizer(const std::filesystem::path& dir);

}  // namespace vkgrad::tokenizers
