#include "corpus.h"

#include <algorithm>
#include <filesystem>

#include "vkgrad/core/error.h"
#include "vkgrad/io/input_file.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

// Regular files only: the licences folder links GPL to GPL-3, counted once as its target.
std::vector<fs::path> filesBelow(const fs::path& path) {
  std::vector<fs::path> files;
  if (!fs::is_directory(path)) return {path};
  for (const auto& entry : fs::recursive_directory_iterator(path))
    if (entry.is_regular_file() && !entry.is_symlink()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<std::string> defaultTrainingPaths() {
  return {"/usr/share/common-licenses"};
}

std::vector<std::string> defaultEncodingPaths() {
  std::vector<std::string> paths;
  const fs::path doc = "/usr/share/doc";
  if (fs::is_directory(doc))
    for (const auto& entry : fs::directory_iterator(doc))
      if (fs::is_regular_file(entry.path() / "copyright"))
        paths.push_back((entry.path() / "copyright").string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

std::string readCorpus(const std::vector<std::string>& paths, size_t max_bytes) {
  std::string text;
  for (const std::string& path : paths) {
    for (const fs::path& file : filesBelow(path)) {
      if (text.size() >= max_bytes) break;
      text += graph::readInputFile(file, "a text file", uint64_t(1) << 32);
    }
  }
  text.resize(std::min(text.size(), max_bytes));
  if (text.empty()) throw Error("no text read from the given files");
  return text;
}

}  // namespace vkgrad::apps
