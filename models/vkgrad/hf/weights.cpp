#include "vkgrad/hf/weights.h"

#include <set>
#include <system_error>

#include "vkgrad/core/error.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::hf {

namespace fs = std::filesystem;
using graph::Json;

namespace {

// A shard's name must stay inside the folder: the index is data, and "../x" or "/etc/x"
// would read a file the user never handed over.
bool plainFileName(const std::string& name) {
  const fs::path p(name);
  return !name.empty() && p.filename() == p && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\\') == std::string::npos;
}

void addShard(HfWeights& weights, const fs::path& path, const std::set<std::string>* listed) {
  graph::Checkpoint shard = graph::loadSafetensors(path);
  for (graph::SavedTensor& t : shard.tensors) {
    if (listed && !listed->count(t.name))
      throw Error(path.string() + ": holds tensor \"" + t.name + "\", which " + kWeightsIndexFile +
                  " does not list for this shard");
    const std::string name = t.name;
    if (!weights.tensors.emplace(name, std::move(t)).second)
      throw Error(path.string() + ": tensor \"" + name + "\" is in another shard too");
  }
  weights.files.push_back(path.filename().string());
}

}  // namespace

HfWeights readHfWeights(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir.string() + ": no such folder");
  HfWeights weights;
  if (fs::is_regular_file(dir / kWeightsFile, ec)) {
    addShard(weights, dir / kWeightsFile, nullptr);
    return weights;
  }
  const fs::path index_path = dir / kWeightsIndexFile;
  if (!fs::is_regular_file(index_path, ec)) {
    const bool bin = fs::exists(dir / "pytorch_model.bin", ec);
    throw Error(dir.string() + ": no " + kWeightsFile + " or " + kWeightsIndexFile +
                (bin ? " (pytorch_model.bin is not read: vkgrad reads safetensors alone)" : ""));
  }
  const std::string where = index_path.string();
  const Json index = graph::readJsonFile(index_path);
  const auto map = index.is_object() ? index.find("weight_map") : index.end();
  if (map == index.end() || !map->is_object() || map->empty())
    throw Error(where + ": needs a non-empty object \"weight_map\"");
  // Shards in the order the index first names them, with the tensors listed for each.
  std::vector<std::string> order;
  std::map<std::string, std::set<std::string>> listed;
  for (const auto& [name, file] : map->items()) {
    if (!file.is_string())
      throw Error(where + ": the shard of \"" + name + "\" must be a file name, got " +
                  graph::dumpJson(file));
    const std::string shard = file.get<std::string>();
    if (!plainFileName(shard))
      throw Error(where + ": shard \"" + shard + "\" is not a file name in the folder");
    if (!listed.count(shard)) order.push_back(shard);
    listed[shard].insert(name);
  }
  for (const std::string& shard : order)
    if (!fs::is_regular_file(dir / shard, ec))
      throw Error(where + ": shard \"" + shard + "\" (holding \"" + *listed[shard].begin() +
                  "\" and " + std::to_string(listed[shard].size() - 1) +
                  " more) is missing from the folder");
  for (const std::string& shard : order) {
    addShard(weights, dir / shard, &listed[shard]);
    for (const std::string& name : listed[shard])
      if (!weights.tensors.count(name))
        throw Error(where + ": lists tensor \"" + name + "\" in shard \"" + shard +
                    "\", which does not hold it");
  }
  return weights;
}

graph::SavedTensor transposedSaved(const graph::SavedTensor& t, const std::string& name) {
  // In the file's format: a 16-bit model stays one (a frozen one is then stored in 16 bits on
  // the device, ParameterStore::setAddFrozen); two 16-bit elements share a word, low half first.
  const size_t rows = size_t(t.shape[0]), cols = size_t(t.shape[1]);
  graph::SavedTensor out{
      name, t.dtype, {t.shape[1], t.shape[0]}, std::vector<uint32_t>(t.data.size())};
  if (ops::dtypeBytes(t.dtype) == 4) {
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c) out.data[c * rows + r] = t.data[r * cols + c];
    return out;
  }
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) {
      const size_t from = r * cols + c, to = c * rows + r;
      const uint32_t half = (t.data[from / 2] >> (16 * (from % 2))) & 0xffffu;
      out.data[to / 2] |= half << (16 * (to % 2));
    }
  return out;
}

}  // namespace vkgrad::hf
