// A checkpoint folder whose files a save replaces together: a reader finds every file of one
// save, or every file of the save before, never a model without its config or a mix of two
// saves. Each file is written atomically (io/atomic_file.h); the set is made atomic by a
// manifest:
//   1. the save writes its files into DIR/.pending/ (fresh), then DIR/.pending/manifest.json
//      (each file's name, size and FNV-1a hash) last: from then on the save is committed;
//   2. it renames each file into DIR, then DIR/.pending/manifest.json over DIR/manifest.json
//      (renames only: a full disk cannot stop a committed save), and removes DIR/.pending.
// A save that fails before its commit (a full disk, say) removes DIR/.pending on the way out.
// A reader first settles what a crash left (checkBundle): an uncommitted .pending is removed,
// a committed one is finished (the renames are idempotent); then DIR's files must match
// DIR/manifest.json. A folder without a manifest (written before bundles) passes as it is.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace vkgrad::graph {

inline constexpr const char* kManifestFile = "manifest.json";
inline constexpr const char* kPendingFolder = ".pending";

class BundleWriter {
 public:
  // Creates DIR/.pending, empty (a crashed save's leftovers go). Throws Error naming DIR.
  explicit BundleWriter(std::filesystem::path dir);
  // A save that never committed removes DIR/.pending, and DIR if this save made it and it is
  // empty; best effort and silent, so the error that ended the save is the one reported.
  ~BundleWriter();
  BundleWriter(const BundleWriter&) = delete;
  BundleWriter& operator=(const BundleWriter&) = delete;
  // Where the save writes its files (DIR/.pending).
  const std::filesystem::path& staging() const { return staging_; }
  // Adds a file the save wrote into staging(); returns its path there.
  std::filesystem::path add(const std::string& name);
  // Commits and installs the files (steps 1 and 2 above). Throws Error naming a file that is
  // missing from staging(), or the filesystem's error; DIR then holds the last save whole (or,
  // if a rename failed after the commit, the next reader finishes this one).
  void commit();

 private:
  std::filesystem::path dir_, staging_;
  std::vector<std::string> names_;
  bool made_dir_ = false;   // DIR did not exist before this save
  bool committed_ = false;  // commit() returned
};

// Settles an interrupted save in dir (see above) and checks its files against its manifest.
// Throws Error "<dir>/<file>: ..." for a file that is missing or differs from the manifest.
void checkBundle(const std::filesystem::path& dir);

}  // namespace vkgrad::graph
