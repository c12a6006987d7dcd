#include "vkgrad/tokenizers/gpt2_files.h"

#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "vkgrad/core/error.h"
#include "vkgrad/io/input_file.h"

namespace vkgrad::tokenizers {
namespace {

constexpr uint64_t kMaxFileBytes = uint64_t(1) << 30;
constexpr const char* kEndOfText = "<|endoftext|>";

// vocab.json: one flat object, so there is no nesting to bound; a key twice is refused.
std::vector<std::pair<std::string, uint32_t>> parseVocab(std::string_view text,
                                                         const std::string& where) {
  using Json = nlohmann::json;
  std::set<std::string> keys;
  auto check = [&](int depth, Json::parse_event_t event, Json& parsed) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth > 0)
      throw Error(where + ": must be one object of token ids, found nesting");
    if (event == Json::parse_event_t::key && depth == 1) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!keys.insert(key).second)
        throw Error(where + ": invalid JSON: key \"" + key + "\" twice in one object");
    }
    return true;
  };
  Json root;
  try {
    root = Json::parse(text, check);
  } catch (const Json::exception& e) {
    throw Error(where + ": invalid JSON: " + e.what());
  }
  if (!root.is_object()) throw Error(where + ": must be an object of token ids");
  std::vector<std::pair<std::string, uint32_t>> vocab;
  vocab.reserve(root.size());
  for (const auto& [token, id] : root.items()) {
    if (!id.is_number_unsigned() || id.get<uint64_t>() > kMaxTokenId)
      throw Error(where + ": token \"" + token + "\" must have an id in [0, " +
                  std::to_string(kMaxTokenId) + "], got " + id.dump());
    vocab.emplace_back(token, uint32_t(id.get<uint64_t>()));
  }
  return vocab;
}

std::vector<std::pair<std::string, std::string>> parseMerges(std::string_view text,
                                                             const std::string& where) {
  std::vector<std::pair<std::string, std::string>> merges;
  size_t begin = 0;
  for (size_t line_number = 1; begin < text.size(); ++line_number) {
    size_t end = text.find('\n', begin);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(begin, end - begin);
    begin = end + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || (line_number == 1 && line.starts_with("#version"))) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || line.find(' ', space + 1) != std::string_view::npos ||
        space == 0 || space + 1 == line.size())
      throw Error(where + ": line " + std::to_string(line_number) +
                  ": a merge must be two tokens separated by one space, got \"" +
                  std::string(line.substr(0, 200)) + "\"");
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  return merges;
}

}  // namespace

Tokenizer parseGpt2Files(std::string_view vocab_text, const std::string& vocab_where,
                         std::string_view merges_text, const std::string& merges_where) {
  BpeSpec spec;
  spec.vocab = parseVocab(vocab_text, vocab_where);
  spec.merges = parseMerges(merges_text, merges_where);
  std::vector<AddedToken> added;
  for (const auto& [token, id] : spec.vocab)
    if (token == kEndOfText) added.push_back({token, id, true});
  return Tokenizer(spec, PreTokenizer::gpt2(), std::move(added),
                   vocab_where + " with " + merges_where);
}

Tokenizer readGpt2Files(const std::filesystem::path& vocab_json,
                        const std::filesystem::path& merges_txt) {
  return parseGpt2Files(
      graph::readInputFile(vocab_json, "a vocab.json", kMaxFileBytes), vocab_json.string(),
      graph::readInputFile(merges_txt, "a merges.txt", kMaxFileBytes), merges_txt.string());
}

}  // namespace vkgrad::tokenizers
