// Copies between strided views: for every index i of a space of up to 6 axes,
//   dst[dst_start + sum_a i_a * dst_strides[a]] (= or +=) alpha * src[src_start + sum_a i_a *
//   src_strides[a]]
// with strides and starts in elements of each view (a view's own offset comes first). Any
// stride may be 0 (an expand reads one element many times). It moves the bytes of the
// graph's shape ops: transpose by any permutation, expand, slice with steps, concat, split
// and pad, and their gradients. The caller keeps every index inside its view (checked: the
// largest index reached must be below the view's element count) and, when it accumulates,
// dst's indices distinct (a scatter with repeats would race).
//
// f32 and u32 views move as 32-bit words, exactly, unless alpha is not 1 or the copy adds
// (floats only then); f16 and bf16 views read and store through f32, either format into the
// other.
#pragma once

#include <array>
#include <cstdint>
#include <span>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

struct Strided {
  const TensorView& view;
  std::span<const int64_t> strides;  // one per space axis
  int64_t start = 0;                 // elements after the view's first
};

// Throws ShapeError naming the op (`op`, for errors) and shapes before recording anything;
// src and dst may not overlap.
void stridedCopy(vk::Recorder& rec, const char* op, const Shape& space, const Strided& src,
                 const Strided& dst, float alpha = 1.0f, Write w = Write::Overwrite);

// Row-major strides of a contiguous shape, padded to Shape::kMaxRank entries.
std::array<int64_t, Shape::kMaxRank> contiguousStrides(const Shape& shape);

}  // namespace vkgrad::ops
