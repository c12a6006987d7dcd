#include "vkgrad/ops/log_softmax.h"

#include "vkgrad/ops/row_kernels.h"
#include "vkgrad/ops/softmax.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

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
