// GPT-2's own tokenizer files: vocab.json (an object of token -> id, tokens in the byte-level
// alphabet) and merges.txt (one merge "a b" per line in rank order, after an optional
// "#version: ..." line). The pre-tokenizer is GPT-2's pattern; "<|endoftext|>", where the
// vocabulary has it, is a special added token as GPT-2's tokenizer.json makes it, so both
// formats of one tokenizer give the same ids.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "vkgrad/tokenizers/tokenizer.h"

namespace vkgrad::tokenizers {

// Throws Error naming the file that cannot be read, is not JSON, or has a malformed line
// (with its number), or Bpe's errors naming vocab.json.
Tokenizer readGpt2Files(const std::filesystem::path& vocab_json,
                        const std::filesystem::path& merges_txt);
// The same for the files' texts; the paths name them in errors.
Tokenizer parseGpt2Files(std::string_view vocab_text, const std::string& vocab_where,
                         std::string_view merges_text, const std::string& merges_where);

}  // namespace vkgrad::tokenizers
