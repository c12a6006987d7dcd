// Axis permutation (a transpose in general): dst = src with dst axis i = src axis perm[i].
// The layout changes a model needs without strided kernels, e.g. (B,T,H,D) -> (B,H,T,D) for
// per-head matmuls. Contiguous src and dst of one dtype: f32, u32, or 16-bit floats (f16,
// bf16), whose bits are moved unchanged.
#pragma once

#include <span>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// perm: a permutation of 0..rank-1; dst.shape[i] must be src.shape[perm[i]]. Its backward
// is permute with the inverse permutation. Throws ShapeError before recording anything on a
// bad permutation, shapes or dtypes, or overlapping src and dst.
void permute(vk::Recorder& rec, const TensorView& src, const TensorView& dst,
             std::span<const int> perm);

}  // namespace vkgrad::ops
