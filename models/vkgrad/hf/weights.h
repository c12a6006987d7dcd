// The tensors of a Hugging Face model folder, by the names the file gives them:
//   DIR/model.safetensors                 one file, or
//   DIR/model.safetensors.index.json      {"weight_map": {"<tensor>": "<shard file>", ...}}
//     and the shards it names, each in DIR.
// Every tensor is read as the file stores it (F32, F16 or BF16; io/safetensors.h); what it
// becomes is the architecture's business (gpt2.h). Reading checks the index against the
// shards: a shard named but absent, a tensor listed for one shard but found in another or in
// none, a tensor a shard holds but the index does not list, a name in two shards.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "vkgrad/io/safetensors.h"

namespace vkgrad::hf {

inline constexpr const char* kWeightsFile = "model.safetensors";
inline constexpr const char* kWeightsIndexFile = "model.safetensors.index.json";

struct HfWeights {
  std::map<std::string, graph::SavedTensor> tensors;  // by the file's name
  std::vector<std::string> files;                     // the files read, in order
};

// Throws Error "<path>: <problem>" for any of the above, a folder with neither file (one with
// only pytorch_model.bin is told that vkgrad reads safetensors alone), a shard name that is
// not a plain file name in DIR, or loadSafetensors' errors. Returns nothing partial.
HfWeights readHfWeights(const std::filesystem::path& dir);

// A 2-d tensor (rows, cols) of any float format -> its transpose (cols, rows) in the same
// format, named `name`: an nn.Linear's (out, in) weight as vkgrad's (in, out), and back.
graph::SavedTensor transposedSaved(const graph::SavedTensor& t, const std::string& name);

}  // namespace vkgrad::hf
