// The texts vkgrad-tokenize trains on and encodes: files named on the command line (a folder
// stands for the regular files below it, in name order), or Debian's own texts by default.
#pragma once

#include <string>
#include <vector>

namespace vkgrad::apps {

// Debian's licences (/usr/share/common-licenses): the default training text.
std::vector<std::string> defaultTrainingPaths();
// Every package's copyright file (/usr/share/doc/*/copyright): the default text to encode,
// about 20 MB of prose, names, addresses and licence text.
std::vector<std::string> defaultEncodingPaths();
// The files' bytes one after another, at most max_bytes of them. Throws Error naming a path
// that cannot be read, or when nothing was read.
std::string readCorpus(const std::vector<std::string>& paths, size_t max_bytes);

}  // namespace vkgrad::apps
