#include "vkgrad/tokenizers/metaspace.h"

namespace vkgrad::tokenizers {

void applyMetaspace(const Metaspace& metaspace, std::string_view text, bool first,
                    std::string& out) {
  if (text.empty()) return;
  const bool starts = text[0] == ' ' || text.substr(0, kMetaspace.size()) == kMetaspace;
  bool prepend = false;
  switch (metaspace.prepend) {
    case Prepend::Never:
      break;
    case Prepend::First:
      prepend = first && !starts;
      break;
    case Prepend::Always:
      prepend = !starts;
      break;
    case Prepend::Every:
      prepend = true;
      break;
  }
  out.reserve(out.size() + text.size() + text.size() / 4 + kMetaspace.size());
  if (prepend) out += kMetaspace;
  size_t run = 0;  // text[run, i) not yet written
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != ' ') continue;
    out.append(text, run, i - run);
    out += kMetaspace;
    run = i + 1;
  }
  out.append(text, run, text.size() - run);
}

void splitMetaspace(const Metaspace& metaspace, std::string_view text,
                    const std::function<void(Piece)>& emit, bool words) {
  if (text.empty()) return;
  if (!metaspace.split && !words) return emit({0, text.size()});
  size_t begin = 0;
  bool after_marker = false;  // text[pos - 3, pos) is a '▁'
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, kMetaspace.size(), kMetaspace) == 0) {
      // A run of '▁' starts a word (merged with what follows, as Hugging Face's Metaspace
      // split does): the word before it ends here.
      if (!after_marker && pos > begin) emit({begin, pos}), begin = pos;
      after_marker = true;
      pos += kMetaspace.size();
    } else {
      after_marker = false;
      ++pos;
    }
  }
  emit({begin, text.size()});
}

bool spacesLeadOnly(std::string_view token) {
  size_t lead = 0;
  while (token.compare(lead, kMetaspace.size(), kMetaspace) == 0) lead += kMetaspace.size();
  return token.find(kMetaspace, lead) == std::string_view::npos;
}

void appendPiece(const PieceDecoder& decoder, std::string_view text, std::string& out) {
  if (!decoder.spaces) {
    out.append(text);
    return;
  }
  size_t run = 0;
  for (size_t pos = text.find(kMetaspace); pos != std::string_view::npos;
       pos = text.find(kMetaspace, run)) {
    out.append(text, run, pos - run);
    out.push_back(' ');
    run = pos + kMetaspace.size();
  }
  out.append(text, run, text.size() - run);
}

}  // namespace vkgrad::tokenizers
