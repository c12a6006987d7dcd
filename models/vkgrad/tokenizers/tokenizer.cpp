#include "vkgrad/tokenizers/tokenizer.h"

#include <algorithm>
#include <optional>

#include "vkgrad/core/error.h"
#include "vkgrad/tokenizers/byte_level.h"
#include "vkgrad/tokenizers/gpt2_files.h"
#include "vkgrad/tokenizers/tokenizer_json.h"

namespace vkgrad::tokenizers {

Tokenizer::Tokenizer(const BpeSpec& bpe, PreTokenizer pre_tokenizer, std::vector<AddedToken> added,
                     const std::string& where, Normalization normalization)
    : bpe_(bpe, where),
      pre_tokenizer_(std::move(pre_tokenizer)),
      added_(std::move(added), where),
      normalization_(normalization) {
  size_ = bpe_.size();
  for (size_t i = 0; i < added_.tokens().size(); ++i) {
    const AddedToken& token = added_.tokens()[i];
    if (token.id > kMaxTokenId)
      throw Error(where + ": added token '" + token.content + "' has id " +
                  std::to_string(token.id) + ", above the largest vkgrad takes (" +
                  std::to_string(kMaxTokenId) + ")");
    if (!added_by_id_.emplace(token.id, i).second)
      throw Error(where + ": id " + std::to_string(token.id) + " is given to two added tokens");
    size_ = std::max(size_, token.id + 1);
  }
}

void Tokenizer::encodeText(std::string_view text, bool first, std::vector<uint32_t>& out) const {
  std::string normalized;
  if (mayNormalize(normalization_, text)) {
    normalized = normalize(normalization_, text);
    text = normalized;
  }
  if (sentence_piece_) {
    std::string spaced;
    applyMetaspace(sentence_piece_->metaspace, text, first, spaced);
    const std::string_view words = spaced;
    splitMetaspace(
        sentence_piece_->metaspace, words,
        [&](Piece w) { bpe_.encodeWord(words.substr(w.begin, w.end - w.begin), out); },
        metaspace_words_);
    return;
  }
  pre_tokenizer_.split(text, 0, text.size(), [&](Piece w) {
    bpe_.encodeWord(text.substr(w.begin, w.end - w.begin), out);
  });
}

std::vector<uint32_t> Tokenizer::encode(std::string_view text, bool special) const {
  std::vector<uint32_t> ids;
  ids.reserve(text.size() / 2 + 1);  // prose takes 2.2-2.7 bytes a token (BENCHMARKS.md)
  size_t pos = 0;
  while (pos < text.size()) {
    const std::optional<AddedTokens::Match> match = added_.next(text, pos, special);
    encodeText(text.substr(pos, (match ? match->begin : text.size()) - pos), pos == 0, ids);
    if (!match) break;
    ids.push_back(match->id);
    pos = match->end;
  }
  return ids;
}

void Tokenizer::setSentencePiece(SentencePiece s) {
  sentence_piece_ = s;
  metaspace_words_ = true;
  for (uint32_t id = 0; id < bpe_.size() && metaspace_words_ && !s.metaspace.split; ++id)
    metaspace_words_ = !bpe_.contains(id) || spacesLeadOnly(bpe_.bytes(id));
}

std::vector<uint32_t> Tokenizer::encodeWithTemplate(std::string_view text, bool open) const {
  std::vector<uint32_t> ids = template_.prefix;
  const std::vector<uint32_t> body = encode(text);
  ids.insert(ids.end(), body.begin(), body.end());
  if (!open) ids.insert(ids.end(), template_.suffix.begin(), template_.suffix.end());
  return ids;
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special,
                              bool continuation) const {
  const PieceDecoder* pieces = sentence_piece_ ? &sentence_piece_->decoder : nullptr;
  std::string out;
  for (const uint32_t id : ids) {
    // An added token decodes to its content even where BPE has the id too, as in Hugging
    // Face's tokenizers (whose decoders see it as any other token's text).
    const auto added = added_by_id_.find(id);
    if (added != added_by_id_.end()) {
      const AddedToken& token = added_.tokens()[added->second];
      if (skip_special && token.special) continue;
      if (pieces)
        appendPiece(*pieces, token.content, out);
      else
        out += token.content;
    } else if (!bpe_.contains(id)) {
      throw Error("token id " + std::to_string(id) + " is not in the vocabulary (" +
                  std::to_string(size_) + " ids)");
    } else if (!pieces) {
      out += bpe_.bytes(id);
    } else if (const int byte = bpe_.byteOf(id); byte >= 0 && pieces->byte_fallback) {
      out.push_back(char(byte));
    } else {
      appendPiece(*pieces, bpe_.bytes(id), out);
    }
  }
  if (pieces && !continuation) {
    // Strip comes after Fuse in the decoder: it sees the whole text, not each token.
    size_t spaces = 0;
    while (spaces < pieces->strip && spaces < out.size() && out[spaces] == ' ') ++spaces;
    out.erase(0, spaces);
  }
  return out;
}

int64_t Tokenizer::tokenId(std::string_view text) const {
  for (const AddedToken& token : added_.tokens())
    if (token.content == text) return token.id;
  const std::optional<std::string> bytes =
      bpe_.alphabet() == BpeAlphabet::ByteLevel ? fromByteLevel(text) : std::nullopt;
  return bpe_.find(bytes ? std::string_view(*bytes) : text);
}

Tokenizer loadTokenizer(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(dir)) throw Error(dir.string() + ": no such folder");
  if (fs::exists(dir / "tokenizer.json")) return readTokenizerJson(dir / "tokenizer.json");
  if (fs::exists(dir / "vocab.json") && fs::exists(dir / "merges.txt"))
    return readGpt2Files(dir / "vocab.json", dir / "merges.txt");
  throw Error(dir.string() +
              ": no tokenizer (neither tokenizer.json nor vocab.json with merges.txt)");
}

}  // namespace vkgrad::tokenizers
