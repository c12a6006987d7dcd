// NumPy's .npy files (format versions 1 to 3): what vkgrad-onnx reads its inputs and targets
// from and writes its outputs to, so that a PyTorch or NumPy script on the other side needs
// nothing but np.load / np.save.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace vkgrad::graph {

// An array as read: float kinds widened to f32 (f16, f32, f64: f64 rounded), integer and
// bool kinds to int64 (i8..i64, u8..u32, bool). C order only.
struct NpyArray {
  enum class Kind { Float, Int };
  Kind kind = Kind::Float;
  std::string descr;           // the file's dtype, e.g. "<f4", "<i8"
  std::vector<int64_t> shape;  // empty: a scalar (one element)
  std::vector<float> floats;   // Kind::Float
  std::vector<int64_t> ints;   // Kind::Int
  int64_t numel() const;
};

// Throws Error naming the file and what is wrong: not an .npy (magic), an unknown version,
// a header that is not the dict np.save writes, Fortran order, an unsupported dtype
// (big-endian, complex, strings, objects, u64), a shape past 2^31 elements or whose bytes the
// file does not hold (truncated), trailing bytes. Reads nothing else.
NpyArray readNpy(const std::filesystem::path& path);
// The same from bytes in memory (`source` names them in errors): what readNpy parses.
NpyArray parseNpy(const std::vector<uint8_t>& bytes, const std::string& source);

// Writes a little-endian float32 array (format 1.0), atomically (io/atomic_file.h).
void writeNpy(const std::filesystem::path& path, const std::vector<int64_t>& shape,
              const std::vector<float>& values);
// The bytes writeNpy writes.
std::vector<uint8_t> encodeNpy(const std::vector<int64_t>& shape, const std::vector<float>& values);

}  // namespace vkgrad::graph
