// Small byte-level BPE vocabularies made in the tests: the 256 bytes (id = byte value), then
// one token per merge in order (ids 256, 257, ...), merges given as byte strings.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "vkgrad/tokenizers/bpe.h"
#include "vkgrad/tokenizers/tokenizer.h"

namespace vkgrad::test {

// merges as bytes: {"h", "e"}, {"he", "llo"}, {" ", "w"}.
tokenizers::BpeSpec smallBpe(const std::vector<std::pair<std::string, std::string>>& merges);

// The tests' hand-checked vocabulary: he(256) ll(257) hell(258) hello(259) " w"(260) or(261)
// " wor"(262) ld(263), with "<|endoftext|>" (264, special) and "<pad>" (265, not special) as
// added tokens, GPT-2's pre-tokenizer.
tokenizers::Tokenizer helloTokenizer();

// Text of Debian's licences (/usr/share/common-licenses), about `bytes` long: real prose for
// training and round trips, present on every Debian system.
std::string licenceText(size_t bytes);

}  // namespace vkgrad::test
