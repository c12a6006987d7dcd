// Images uploaded as bytes, widened to floats on the device, as a graph op
// (ops/bytes_to_float.h; defined in bytes_to_float.cpp).
#pragma once

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// words (N, ...) u32 holding u8 data 4 bytes per word, little-endian (images uploaded as
// bytes and gathered per batch) -> out_shape f32, out = byte * scale + shift. out_shape
// holds 4x the words' elements and leads with N. Not differentiable.
Tensor bytesToFloat(Graph& g, Tensor words, const Shape& out_shape, float scale,
                    float shift = 0.0f);

}  // namespace vkgrad::graph
