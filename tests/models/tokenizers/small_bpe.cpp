#include "models/tokenizers/small_bpe.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "vkgrad/tokenizers/byte_level.h"

namespace vkgrad::test {

using tokenizers::toByteLevel;

tokenizers::BpeSpec smallBpe(const std::vector<std::pair<std::string, std::string>>& merges) {
  tokenizers::BpeSpec spec;
  for (int b = 0; b < 256; ++b) spec.vocab.emplace_back(toByteLevel(std::string(1, char(b))), b);
  for (const auto& [left, right] : merges) {
    const std::string merged = toByteLevel(left + right);
    const bool known = std::any_of(spec.vocab.begin(), spec.vocab.end(),
                                   [&](const auto& entry) { return entry.first == merged; });
    if (!known) spec.vocab.emplace_back(merged, uint32_t(spec.vocab.size()));
    spec.merges.emplace_back(toByteLevel(left), toByteLevel(right));
  }
  return spec;
}

tokenizers::Tokenizer helloTokenizer() {
  const tokenizers::BpeSpec spec = smallBpe({{"h", "e"},
                                             {"l", "l"},
                                             {"he", "ll"},
                                             {"hell", "o"},
                                             {" ", "w"},
                                             {"o", "r"},
                                             {" w", "or"},
                                             {"l", "d"}});
  return tokenizers::Tokenizer(spec, tokenizers::PreTokenizer::gpt2(),
                               {{"<|endoftext|>", 264, true}, {"<pad>", 265, false}}, "hello");
}

std::string licenceText(size_t bytes) {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator("/usr/share/common-licenses"))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  std::string text;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (text.size() >= bytes) break;
  }
  text.resize(std::min(text.size(), bytes));
  return text;
}

}  // namespace vkgrad::test
