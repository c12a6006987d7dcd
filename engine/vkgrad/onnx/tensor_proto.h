// TensorProto <-> HostTensor: the one place that knows how ONNX stores tensor bytes (typed
// fields or raw little-endian bytes, inline or in an external file).
#pragma once

#include <filesystem>
#include <string>

#include "vkgrad/onnx/host_tensor.h"

namespace onnx {
class TensorProto;
}

namespace vkgrad::onnx {

// Reads t (named `what` in errors) whose external data, if any, lies in `folder`. Throws
// Error for an unsupported type (strings, complex), negative dims, more than 2^31 elements,
// a byte count that is not the shape's, or an external file that is missing, outside
// `folder` or too short.
HostTensor readTensor(const ::onnx::TensorProto& t, const std::filesystem::path& folder,
                      const std::string& what);
// Stores f32 values into t's own float type (float, float16, bfloat16, double) as raw bytes,
// inline (any external location dropped).
void writeFloats(::onnx::TensorProto& t, const std::vector<float>& values);

}  // namespace vkgrad::onnx
