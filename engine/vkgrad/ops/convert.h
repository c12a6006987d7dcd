// dst = src between float formats: f32, f16 and bf16 in any pair (the same format copies).
// Widening is exact; narrowing rounds to nearest even, overflow to ±inf, NaN stays NaN, as
// ops/reference/half.h does on the host. The graph's cast and its backward (a cast back).
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// src, dst: the same number of elements (shapes may differ, as in a reshape), float dtypes,
// not overlapping. Throws ShapeError before recording anything otherwise.
void convert(vk::Recorder& rec, const TensorView& src, const TensorView& dst);

}  // namespace vkgrad::ops
