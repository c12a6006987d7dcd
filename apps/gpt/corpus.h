// The text vkgrad-gpt trains on (--data): one file, or a directory of text files read as one
// corpus (Debian's fortunes in /usr/share/games/fortunes, say).
#pragma once

#include <cstddef>
#include <string>

namespace vkgrad::apps {

struct Corpus {
  std::string text;
  size_t files = 0;  // how many files it was read from
};

// The whole file at path. For a directory: every regular file directly in it, in name order,
// each followed by a newline where it does not end in one, except symlinks (fortunes links
// name.u8 to name: read once), hidden files and *.dat (strfile's binary indexes of fortune
// files); subdirectories are not entered. Error for a missing, unreadable or empty file, a
// directory with no such file, a file holding a NUL byte (not text: named, not skipped), or
// more than 1 GiB in all.
Corpus readCorpus(const std::string& path);

}  // namespace vkgrad::apps
