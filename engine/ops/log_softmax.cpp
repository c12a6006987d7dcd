#include "ops/log_softmax.h"

#include "ops/row_kernels.h"
#include "ops/softmax.h"
#include "vk/context.h"
#include "vk/memory.h"
#include "vk/recorder.h"

namespace vkgrad::ops {

void logSoftmax(vk::Recorder& rec, const TensorView& x, const TensorView& y,
                SoftmaxVariant variant) {
  rowMap(rec, "logSoftmax", "log_softmax/forward", x, y, variant);
}

void logSoftmaxBackward(vk::Recorder& rec, const TensorView& y, const TensorView& dy,
                        const TensorView& dx, Write w, SoftmaxVariant variant) {
  rowMapBackward(rec, "logSoftmaxBackward", "log_softmax/backward", y, dy, dx, w, variant);
}

}  // namespace vkgrad::ops
