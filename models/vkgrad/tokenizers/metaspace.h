// SentencePiece's spaces, as tokenizer.json writes them for Llama 2, TinyLlama and Mistral:
// each ' ' of the text becomes '▁' (U+2581) and a '▁' goes before the text, so "Hello world"
// is encoded as "▁Hello▁world"; decoding turns '▁' back into ' ' and strips the space the
// encoder put first. Older files do it in the normalizer (Prepend "▁", Replace " " by "▁"),
// newer ones in a Metaspace pre-tokenizer, which puts no '▁' before a text that already starts
// with one ("first": only before the start of the whole text, not after an added token).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "vkgrad/tokenizers/regex_split.h"

namespace vkgrad::tokenizers {

inline constexpr std::string_view kMetaspace = "\xe2\x96\x81";  // '▁', U+2581

// Where a '▁' is put before a stretch of text (the text between two added tokens).
enum class Prepend {
  Never,
  First,   // before the stretch that starts the text, unless it starts with '▁'
  Always,  // before every stretch that does not start with '▁'
  Every,   // before every stretch, whatever it starts with (the Prepend normalizer)
};

struct Metaspace {
  Prepend prepend = Prepend::Every;
  bool split = false;  // each run of '▁' starts a word; else the stretch is one word
};

// text (one stretch) with ' ' written as '▁' and the prepend applied, appended to out; `first`:
// the stretch starts the encoded text. An empty stretch stays empty.
void applyMetaspace(const Metaspace& metaspace, std::string_view text, bool first,
                    std::string& out);
// Calls emit with the words of text (as applyMetaspace wrote it): the whole of it, or with
// split (or `words`), pieces that each start at a run of '▁' ("a▁▁b" is "a", "▁▁b"). None is
// empty.
void splitMetaspace(const Metaspace& metaspace, std::string_view text,
                    const std::function<void(Piece)>& emit, bool words = false);
// Whether every '▁' of a token's text is in the run it starts with ("▁▁the" but not "d▁").
// When all of a vocabulary's tokens are so, no merge can join across the start of a run of '▁',
// so an unsplit text encodes as its words do, and their cache can serve (SentencePiece's
// vocabularies, trained with split_by_whitespace, are all so).
bool spacesLeadOnly(std::string_view token);

// How SentencePiece-style tokens decode: tokenizer.json's decoder Sequence [Replace "▁" by " ",
// ByteFallback, Fuse, Strip " " from the start], or a Metaspace decoder (no byte fallback).
struct PieceDecoder {
  bool spaces = false;         // '▁' in a token's text decodes to ' '
  bool byte_fallback = false;  // a "<0xXX>" token decodes to its byte (invalid UTF-8 kept)
  uint32_t strip = 0;          // up to this many ' ' removed from the start of the decoded text
};

// One token's text decoded by `decoder` (its '▁' made spaces), appended to out.
void appendPiece(const PieceDecoder& decoder, std::string_view text, std::string& out);

}  // namespace vkgrad::tokenizers
