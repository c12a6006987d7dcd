#include "vkgrad/tokenizers/regex_split.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <cctype>
#include <utility>

#include "vkgrad/core/error.h"

namespace vkgrad::tokenizers {

const char* const kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

namespace {

pcre2_code* code(void* p) {
  return static_cast<pcre2_code*>(p);
}

// One match block per thread, shared by every pattern: only the whole match's offsets are
// read, and one pair suffices for that whatever the pattern's groups.
pcre2_match_data* matchData() {
  struct Holder {
    pcre2_match_data* data = pcre2_match_data_create(1, nullptr);
    ~Holder() { pcre2_match_data_free(data); }
  };
  thread_local Holder holder;
  if (!holder.data) throw std::bad_alloc();
  return holder.data;
}

// The length of the UTF-8 character starting at text[pos], or 1 for a byte that starts none.
size_t characterLength(std::string_view text, size_t pos) {
  const uint8_t lead = uint8_t(text[pos]);
  const size_t n = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return pos + n <= text.size() ? n : 1;
}

}  // namespace

SplitRegex::SplitRegex(std::string_view pattern, bool literal, const std::string& where)
    : pattern_(pattern) {
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF;
  // PCRE2_LITERAL excludes PCRE2_MATCH_INVALID_UTF, so a plain string is escaped instead: a
  // backslash before each ASCII character that is not a letter or digit makes it literal.
  std::string source;
  if (literal) {
    for (const char ch : pattern) {
      const uint8_t b = uint8_t(ch);
      if (b < 0x80 && !std::isalnum(b)) source.push_back('\\');
      source.push_back(ch);
    }
  } else {
    source = pattern;
  }
  int error = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(source.data()), source.size(),
                                       options, &error, &offset, nullptr);
  if (!compiled) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(where + ": pattern '" + std::string(pattern) + "' does not compile: " +
                reinterpret_cast<const char*>(message) + " at offset " + std::to_string(offset));
  }
  // JIT matching is several times faster; where the system forbids it (no executable memory)
  // pcre2_match interprets the same pattern, with the same results.
  (void)pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE);
  code_ = compiled;
}

SplitRegex::~SplitRegex() {
  pcre2_code_free(code(code_));
}

SplitRegex::SplitRegex(SplitRegex&& other) noexcept
    : pattern_(std::move(other.pattern_)), code_(std::exchange(other.code_, nullptr)) {}

SplitRegex& SplitRegex::operator=(SplitRegex&& other) noexcept {
  std::swap(pattern_, other.pattern_);
  std::swap(code_, other.code_);
  return *this;
}

void SplitRegex::split(std::string_view text, size_t begin, size_t end,
                       const std::function<void(Piece)>& emit_piece) const {
  // The piece alone is the subject: a lookaround sees nothing outside it, as each piece of a
  // sequence of pre-tokenizers is split on its own.
  const std::string_view subject = text.substr(begin, end - begin);
  const auto* data = reinterpret_cast<PCRE2_SPTR>(subject.data());
  pcre2_match_data* match = matchData();
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match);
  size_t done = 0;  // subject[0, done) is in out
  size_t at = 0;    // where the next search starts
  uint32_t flags = 0;
  const auto emit = [&](size_t from, size_t to) {
    if (to > from) emit_piece({begin + from, begin + to});
  };
  while (at < subject.size()) {
    const int rc = pcre2_match(code(code_), data, subject.size(), at, flags, match, nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) {
      if (flags == 0) break;  // nothing further matches: the rest is a gap
      // No non-empty match at an empty match's position: step over one character (a byte
      // that starts none is skipped by PCRE2 as invalid anyway).
      flags = 0;
      at += characterLength(subject, at);
      continue;
    }
    if (rc < 0) {
      // A limit PCRE2 hit (pathological backtracking): the character at `at` stands alone.
      emit(done, at);
      const size_t next = at + characterLength(subject, at);
      emit(at, next);
      done = at = next;
      flags = 0;
      continue;
    }
    const size_t match_begin = ovector[0], match_end = ovector[1];
    emit(done, match_begin);  // a gap: bytes no match covers
    emit(match_begin, match_end);
    done = match_end;
    at = match_end;
    // After an empty match, look for a non-empty one at the same place before moving on, as
    // other regex engines' find-all loops do.
    flags = match_end == match_begin ? PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED : 0;
  }
  emit(done, subject.size());
}

}  // namespace vkgrad::tokenizers
