// Added tokens ("<|endoftext|>", "<|im_start|>", ...): exact strings found in the text before
// it is pre-tokenized, each becoming its one id, as Hugging Face's tokenizers do. Where several
// could match, the one starting first wins, and of those the longest.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vkgrad::tokenizers {

struct AddedToken {
  std::string content;  // the text it matches, non-empty
  uint32_t id = 0;
  bool special = false;  // a control token (end of text, a chat role); can be left unmatched
};

class AddedTokens {
 public:
  AddedTokens() = default;
  // Throws Error "<where>: ..." for an empty content or a content given twice.
  AddedTokens(std::vector<AddedToken> tokens, const std::string& where);

  struct Match {
    size_t begin = 0, end = 0;  // text[begin, end) is the token
    uint32_t id = 0;
  };
  // The first match in text at or after pos; special tokens only when `special`.
  std::optional<Match> next(std::string_view text, size_t pos, bool special) const;

  const std::vector<AddedToken>& tokens() const { return tokens_; }
  // The token with this id, or nullptr.
  const AddedToken* byId(uint32_t id) const;
  bool empty() const { return tokens_.empty(); }

 private:
  // A trie over the contents' bytes: node 0 is the root.
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t token = -1;  // index into tokens_ of the content ending here
  };
  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  bool starts_[256] = {};  // bytes some content starts with
};

}  // namespace vkgrad::tokenizers
