#include "vkgrad/io/bundle.h"

#include <cstdint>
#include <cstdio>
#include <fstream>

#include "vkgrad/core/error.h"
#include "vkgrad/io/atomic_file.h"
#include "vkgrad/io/atomic_file_platform.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::graph {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "vkgrad-checkpoint";
constexpr int kVersion = 1;

// The size and 64-bit FNV-1a hash of a file, as the manifest records them.
struct FileSum {
  uint64_t bytes = 0;
  std::string fnv1a;
};
FileSum sumOf(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path.string() + ": missing (the checkpoint's manifest lists it)");
  FileSum sum;
  uint64_t h = 0xcbf29ce484222325ull;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    const std::streamsize n = in.gcount();
    for (std::streamsize i = 0; i < n; ++i) h = (h ^ uint8_t(buffer[i])) * 0x100000001b3ull;
    sum.bytes += uint64_t(n);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  sum.fnv1a = hex;
  return sum;
}

Json manifestOf(const fs::path& dir, const std::vector<std::string>& names) {
  Json files = Json::object();
  for (const std::string& name : names) {
    const FileSum sum = sumOf(dir / name);
    files[name] = {{"bytes", sum.bytes}, {"fnv1a", sum.fnv1a}};
  }
  return {{"format", kFormat}, {"version", kVersion}, {"files", files}};
}

// The manifest's files, checked for shape; Error naming `where`.
const Json& manifestFiles(const Json& manifest, const fs::path& where) {
  try {
    jsonCheckFormat(manifest, kFormat, kVersion);
    const Json& files = jsonObject(manifest, "files");
    for (const auto& [name, entry] : files.items()) {
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        throw Error("\"" + name + "\" is not a file name");
      jsonUint(jsonMember(entry, "bytes"), "\"bytes\"");
      jsonString(entry, "fnv1a");
    }
    return files;
  } catch (const Error& e) {
    throw Error(where.string() + ": " + e.what());
  }
}

// Renames what is still staged into dir, writes dir's manifest and removes the staging folder.
void install(const fs::path& dir, const fs::path& staging, const Json& manifest) {
  for (const auto& [name, entry] : manifestFiles(manifest, staging / kManifestFile).items()) {
    std::error_code ec;
    if (fs::exists(staging / name, ec)) fs::rename(staging / name, dir / name);
  }
  // The staged manifest moves rather than being written again: a committed save needs no more
  // space, so a full disk cannot leave DIR's new files beside the old manifest.
  platform::replaceDurably(staging / kManifestFile, dir / kManifestFile,
                           (dir / kManifestFile).string());
  // What is left is empty and uncommitted: if it stays, the next reader removes it.
  std::error_code ec;
  fs::remove_all(staging, ec);
}

}  // namespace

BundleWriter::BundleWriter(fs::path dir) : dir_(std::move(dir)), staging_(dir_ / kPendingFolder) {
  std::error_code ec;
  made_dir_ = !fs::exists(dir_, ec) && !ec;
  fs::remove_all(staging_, ec);
  if (ec || !fs::create_directories(staging_, ec))
    throw Error(staging_.string() + ": cannot create the checkpoint's staging folder" +
                (ec ? ": " + ec.message() : ""));
}

BundleWriter::~BundleWriter() {
  if (committed_) return;
  std::error_code ec;
  // A staged manifest means the save committed and only its renames failed: the next reader
  // finishes it. (Where even that cannot be told, the staging folder is left to the reader.)
  if (fs::exists(staging_ / kManifestFile, ec) || ec) return;
  fs::remove_all(staging_, ec);
  if (made_dir_) fs::remove(dir_, ec);  // only if empty: removes no file
}

fs::path BundleWriter::add(const std::string& name) {
  names_.push_back(name);
  return staging_ / name;
}

void BundleWriter::commit() {
  const Json manifest = manifestOf(staging_, names_);
  writeFileAtomically(staging_ / kManifestFile, dumpJson(manifest, 2) + "\n");  // committed
  install(dir_, staging_, manifest);
  committed_ = true;
}

void checkBundle(const fs::path& dir) {
  const fs::path staging = dir / kPendingFolder;
  std::error_code ec;
  if (fs::is_directory(staging, ec)) {
    if (fs::exists(staging / kManifestFile, ec))
      install(dir, staging, readJsonFile(staging / kManifestFile));  // committed: finish it
    else
      fs::remove_all(staging, ec);  // never committed: the files in dir are the last save's
  }
  if (!fs::exists(dir / kManifestFile, ec)) return;
  const Json manifest = readJsonFile(dir / kManifestFile);
  for (const auto& [name, entry] : manifestFiles(manifest, dir / kManifestFile).items()) {
    const FileSum sum = sumOf(dir / name);
    if (sum.bytes != entry["bytes"].get<uint64_t>() || sum.fnv1a != entry["fnv1a"])
      throw Error(
          (dir / name).string() + ": differs from the checkpoint's manifest (" +
          std::to_string(sum.bytes) + " bytes, fnv1a " + sum.fnv1a +
          "; the manifest: " + std::to_string(entry["bytes"].get<uint64_t>()) + " bytes, fnv1a " +
          entry["fnv1a"].get<std::string>() +
          "): changed since it was saved, or from another save (to read the files as they are, "
          "remove " +
          (dir / kManifestFile).string() + ")");
  }
}

}  // namespace vkgrad::graph
