#include "vkgrad/tokenizers/added_tokens.h"

#include "vkgrad/core/error.h"

namespace vkgrad::tokenizers {

AddedTokens::AddedTokens(std::vector<AddedToken> tokens, const std::string& where)
    : tokens_(std::move(tokens)), nodes_(1) {
  for (size_t t = 0; t < tokens_.size(); ++t) {
    const std::string& content = tokens_[t].content;
    if (content.empty())
      throw Error(where + ": added token " + std::to_string(tokens_[t].id) + " has no content");
    int32_t node = 0;
    for (const char ch : content) {
      const uint8_t b = uint8_t(ch);
      int32_t child = -1;
      for (const auto& [byte, index] : nodes_[size_t(node)].children)
        if (byte == b) child = index;
      if (child < 0) {
        child = int32_t(nodes_.size());
        nodes_[size_t(node)].children.emplace_back(b, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    if (nodes_[size_t(node)].token >= 0)
      throw Error(where + ": added token '" + content + "' is listed twice");
    nodes_[size_t(node)].token = int32_t(t);
    starts_[uint8_t(content[0])] = true;
  }
}

std::optional<AddedTokens::Match> AddedTokens::next(std::string_view text, size_t pos,
                                                    bool special) const {
  if (tokens_.empty()) return std::nullopt;
  for (size_t begin = pos; begin < text.size(); ++begin) {
    if (!starts_[uint8_t(text[begin])]) continue;
    int32_t node = 0;
    std::optional<Match> longest;
    for (size_t i = begin; i < text.size(); ++i) {
      int32_t child = -1;
      for (const auto& [byte, index] : nodes_[size_t(node)].children)
        if (byte == uint8_t(text[i])) child = index;
      if (child < 0) break;
      node = child;
      const int32_t t = nodes_[size_t(node)].token;
      if (t >= 0 && (special || !tokens_[size_t(t)].special))
        longest = Match{begin, i + 1, tokens_[size_t(t)].id};
    }
    if (longest) return longest;
  }
  return std::nullopt;
}

const AddedToken* AddedTokens::byId(uint32_t id) const {
  for (const AddedToken& t : tokens_)
    if (t.id == id) return &t;
  return nullptr;
}

}  // namespace vkgrad::tokenizers
