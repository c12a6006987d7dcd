// Confusion matrix of a classifier, counted on the device: counts[label][prediction] += 1 for
// every row, where prediction is the argmax of the row's logits, so an evaluation reads back
// C*C words instead of every logit. Integer atomics: the counts are exact and do not depend
// on the order rows are counted in.
//   argmax: the first maximum on ties; a NaN counts as larger than any number (as numpy's
//           argmax does), so a row predicts its first NaN, and a diverged all-NaN row class 0.
//   labels >= C (padding, an ignore index) are counted nowhere: the matrix's sum is the
//           number of rows with a label below C.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule, Vulkan-free (the graph builder uses it too): logits (..., C) f32, f16 or
// bf16 (compared as f32; ops/storage.h) with at least 2 dims, labels u32 of logits' shape
// without C, C below 2^16, rows below 2^31. Returns the counts' shape (C,C). Throws ShapeError
// "confusion: logits (5,3), labels (4): labels must have the shape of logits without C".
Shape confusionShape(const Shape& logits, DType logits_dtype, const Shape& labels,
                     DType labels_dtype);

// logits: (..., C) in a float format; labels: (...) u32; counts: (C,C) u32. Overwrite zeroes counts
// first; Accumulate adds to them (a running count over batches; u32, so below 2^32 per cell).
// counts must not overlap the inputs.
void confusion(vk::Recorder& rec, const TensorView& logits, const TensorView& labels,
               const TensorView& counts, Write w = Write::Overwrite);

}  // namespace vkgrad::ops
