#include "vkgrad/ops/pad.h"

#include <cmath>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// pad/index.glsl's push constants.
struct PadPush {
  uint32_t count;      // elements of y (forward) or dx (backward)
  uint32_t h, w;       // x's last two axes
  uint32_t ho, wo;     // y's
  uint32_t top, left;  // elements added before each axis
  float value;         // Constant's fill
  uint32_t x_skip, y_skip;
};
static_assert(sizeof(PadPush) == 40);

std::string describe(const Shape& x, const Padding& p) {
  return "pad: x " + x.str() + " with " + (p.mode == PadMode::Reflect ? "reflect" : "constant") +
         " (top " + std::to_string(p.top) + ", bottom " + std::to_string(p.bottom) + ", left " +
         std::to_string(p.left) + ", right " + std::to_string(p.right) + ")";
}

// x's last two axes, (1, W) for a rank-1 x.
int64_t axisH(const Shape& x) {
  return x.rank() >= 2 ? x[x.rank() - 2] : 1;
}

// Checks x and y against each other and records one kernel over y (forward) or dx (backward).
void record(const char* fn, vk::Recorder& rec, const TensorView& x, const char* x_name,
            const TensorView& y, const char* y_name, const Padding& padding, bool backward,
            Write write) {
  const Shape want = padShape(x.shape, padding);
  if (!(y.shape == want))
    throw ShapeError(describe(x.shape, padding) + ": " + y_name + " " + y.shape.str() +
                     " must be " + want.str());
  checkFloatOperand(fn, x_name, x);
  checkFloatOperand(fn, y_name, y);
  if (backward)
    checkAlias(fn, x_name, x, y_name, y, false);
  else
    checkAlias(fn, y_name, y, x_name, x, false);

  vk::Context& context = rec.context();
  const Bound bx = bindStorage(context, x), by = bindStorage(context, y);
  const PadPush push{uint32_t(backward ? x.shape.numel() : y.shape.numel()),
                     uint32_t(axisH(x.shape)),
                     uint32_t(x.shape.back()),
                     uint32_t(axisH(y.shape)),
                     uint32_t(y.shape.back()),
                     uint32_t(padding.top),
                     uint32_t(padding.left),
                     padding.value,
                     bx.skip,
                     by.skip};
  const bool reflect = padding.mode == PadMode::Reflect;
  const uint32_t group = workgroupSize(context);
  const vk::Kernel& kernel =
      backward
          ? floatKernel(context, "pad/backward",
                        {{"local_size_x", group},
                         {"kReflect", reflect},
                         {"kAccumulate", write == Write::Accumulate}},
                        {{"dx_dtype", x.dtype}, {"dy_dtype", y.dtype}})
          : floatKernel(context, "pad/forward", {{"local_size_x", group}, {"kReflect", reflect}},
                        {{"x_dtype", x.dtype}, {"y_dtype", y.dtype}});
  const vk::Arg args[] = {bx.arg, by.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), gridGroups(context, push.count, group));
}

}  // namespace

Shape padShape(const Shape& x, const Padding& padding) {
  const std::string op = describe(x, padding);
  if (x.rank() < 1 || x.rank() > 4 || x.numel() == 0)
    throw ShapeError(op + ": x must be a non-empty tensor of rank 1 to 4");
  const Padding& p = padding;
  if (p.top < 0 || p.bottom < 0 || p.left < 0 || p.right < 0)
    throw ShapeError(op + ": amounts must be >= 0");
  if (x.rank() == 1 && (p.top > 0 || p.bottom > 0))
    throw ShapeError(op + ": a rank-1 x pads only left and right");
  const int64_t h = axisH(x), w = x.back();
  if (p.mode == PadMode::Reflect && (p.top >= h || p.bottom >= h || p.left >= w || p.right >= w))
    throw ShapeError(op + ": reflect amounts must be below their axis (" + std::to_string(h) +
                     ", " + std::to_string(w) + ")");
  if (p.mode == PadMode::Constant && !std::isfinite(p.value))
    throw ShapeError(op + ": the fill must be finite");
  int64_t dims[Shape::kMaxRank];
  for (int i = 0; i < x.rank(); ++i) dims[i] = x[i];
  dims[x.rank() - 1] = w + p.left + p.right;
  if (x.rank() >= 2) dims[x.rank() - 2] = h + p.top + p.bottom;
  const Shape y = Shape::of(dims, x.rank());
  if (y.numel() > (int64_t(1) << 31)) throw ShapeError(op + ": y " + y.str() + " is too large");
  return y;
}

void pad(vk::Recorder& rec, const TensorView& x, const TensorView& y, const Padding& padding) {
  record("pad", rec, x, "x", y, "y", padding, false, Write::Overwrite);
}

void padBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& dx,
                 const Padding& padding, Write write) {
  record("padBackward", rec, dx, "dx", dy, "dy", padding, true, write);
}

}  // namespace vkgrad::ops
