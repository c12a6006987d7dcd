#include "gpt/corpus.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/io/input_file.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

// Each byte becomes a 4-byte token on the device: 1 GiB of text is 4 GiB of token stream.
constexpr uint64_t kMaxBytes = uint64_t(1) << 30;

// The files of a corpus directory, in name order (see readCorpus).
std::vector<fs::path> corpusFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_symlink() || !entry.is_regular_file() || name.starts_with(".") ||
        name.ends_with(".dat"))
      continue;
    files.push_back(entry.path());
  }
  if (ec) throw Error(dir.string() + ": cannot list the directory: " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

Corpus readCorpus(const std::string& path) {
  if (path.empty()) throw Error("no --data file or directory given");
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    Corpus corpus{graph::readInputFile(path, "a text file", kMaxBytes), 1};
    if (corpus.text.empty()) throw Error(path + ": the file is empty");
    return corpus;
  }
  const std::vector<fs::path> files = corpusFiles(path);
  if (files.empty())
    throw Error(path +
                ": the directory holds no text files (its regular files but hidden ones "
                "and *.dat are read; symlinks and subdirectories are not)");
  Corpus corpus;
  for (const fs::path& file : files) {
    const uint64_t left = kMaxBytes - std::min<uint64_t>(corpus.text.size(), kMaxBytes);
    const std::string text = graph::readInputFile(file, "a text file", left);
    if (text.find('\0') != std::string::npos)
      throw Error(file.string() + ": holds a NUL byte, not text (remove it from " + path +
                  " or name one file with --data)");
    corpus.text += text;
    if (!text.empty() && text.back() != '\n') corpus.text += '\n';
    ++corpus.files;
  }
  if (corpus.text.empty()) throw Error(path + ": every file in the directory is empty");
  return corpus;
}

}  // namespace vkgrad::apps
