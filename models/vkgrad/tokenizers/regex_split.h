// Splitting text by a regular expression, as Hugging Face's Split pre-tokenizer does with its
// "Isolated" behaviour: every match is a piece, and so is every stretch between matches. The
// matching is PCRE2's (Debian's libpcre2-dev) with Unicode properties (\p{L}, \p{N}, and \s as
// Unicode white space), JIT-compiled where the system allows it.
//
// Any bytes can be split, invalid UTF-8 included: the pattern is compiled with
// PCRE2_MATCH_INVALID_UTF, so an invalid sequence never matches and ends up in a gap piece of
// its own. Splitting never fails: should PCRE2 give up on some input (a resource limit), the
// character at that point becomes a piece alone and matching resumes after it.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace vkgrad::tokenizers {

// GPT-2's pre-tokenizer pattern (its encoder.py, and ByteLevel's use_regex in tokenizer.json).
extern const char* const kGpt2Pattern;

// A piece of a split text: bytes [begin, end) of it.
struct Piece {
  size_t begin = 0, end = 0;
};

class SplitRegex {
 public:
  // A pattern (or, with literal, a plain string to find). Throws Error "<where>: pattern
  // '<pattern>' does not compile: <PCRE2's message> at offset N".
  SplitRegex(std::string_view pattern, bool literal, const std::string& where);
  ~SplitRegex();
  SplitRegex(SplitRegex&& other) noexcept;
  SplitRegex& operator=(SplitRegex&& other) noexcept;
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  // Calls emit with each piece of text[begin, end), in order, covering it exactly; empty
  // pieces are left out. Safe to call from several threads at once.
  void split(std::string_view text, size_t begin, size_t end,
             const std::function<void(Piece)>& emit) const;

  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8
};

}  // namespace vkgrad::tokenizers
