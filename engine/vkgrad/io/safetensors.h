// Checkpoints in the safetensors format, which other tools read too:
//   8 bytes   N, the header length, little-endian u64
//   N bytes   a JSON object: {"<name>": {"dtype": "F32", "shape": [2, 3],
//             "data_offsets": [begin, end]}, ..., "__metadata__": {"<key>": "<text>"}}
//             (padded with spaces to a multiple of 8, so the data stays aligned)
//   the data  each tensor's raw little-endian bytes at [begin, end) of this region, packed
//             without holes or overlaps
// Writing goes to a temporary file beside the target, flushed to disk, then renamed over it:
// a crash leaves the old checkpoint or the new one, never half of one. Reading checks
// everything above and throws vkgrad::Error naming the file and the problem; it returns
// nothing partial.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::graph {

struct SavedTensor {
  std::string name;
  ops::DType dtype = ops::DType::F32;  // F32, U32, F16 or BF16
  std::vector<int64_t> shape;
  // 32-bit words: one element each (F32, U32), or two 16-bit elements each, the first in the
  // low half (F16, BF16: the file's bytes; an odd count leaves the last high half 0).
  std::vector<uint32_t> data;
  uint64_t bytes() const;  // of the elements themselves: count * 4 or count * 2
};

// Words for `elements` values of dtype.
size_t savedWords(ops::DType dtype, uint64_t elements);
// t's values in another float format (F32, F16, BF16): widening is exact, narrowing rounds to
// nearest even (ops/reference/half.h). Throws Error for U32.
SavedTensor convertSaved(const SavedTensor& t, ops::DType dtype);

// "" when every value of a float tensor is finite (u32 tensors always), else where the first
// one that is not lies: "holds NaN at element 12" (or inf). A NaN weight or optimizer moment
// would train or sample garbage without a word, so loading and saving check with this.
std::string nonFiniteText(const SavedTensor& t);

struct Checkpoint {
  std::vector<SavedTensor> tensors;  // in file order
  std::map<std::string, std::string> metadata;
};

// A shape as saved dims, and saved dims as text: "(2,3)".
std::vector<int64_t> savedDims(const ops::Shape& shape);
std::string dimsText(const std::vector<int64_t>& dims);

// Throws Error on a duplicate or empty name, a name or metadata that is not UTF-8, a data size
// that does not match the shape, or a file system failure (the target is then left as it was).
void saveSafetensors(const std::filesystem::path& path, const Checkpoint& checkpoint);

// Throws Error "<path>: <problem>" for a missing, truncated or malformed file: header length
// past the end or above 100 MB, invalid JSON (a key given twice too), unknown dtype, shape and
// offsets that disagree or that overflow, offsets out of range, overlapping or leaving holes,
// trailing bytes.
Checkpoint loadSafetensors(const std::filesystem::path& path);

}  // namespace vkgrad::graph
