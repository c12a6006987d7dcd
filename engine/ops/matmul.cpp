#include "ops/matmul.h"

#include "vk/context.h"
#include "vk/error.h"
#include "vk/kernel.h"

namespace vkgrad::ops {
namespace {

struct MatmulPush {
  uint32_t m, n, k;
};
static_assert(sizeof(MatmulPush) == 12);

void checkShapes(const TensorView& a, const TensorView& b, const TensorView& c) {
  const std::string shapes = a.shape.str() + " x " + b.shape.str() + " -> " + c.shape.str();
  if (a.shape.rank() != 2 || b.shape.rank() != 2 || c.shape.rank() != 2)
    throw ShapeError("matmul: " + shapes + ": operands must be 2-D");
  if (a.shape[1] != b.shape[0])
    throw ShapeError("matmul: " + shapes + ": inner dims differ");
  if (c.shape[0] != a.shape[0] || c.shape[1] != b.shape[1])
    throw ShapeError("matmul: " + shapes + ": output must be (" + std::to_string(a.shape[0]) +
                     "," + std::to_string(b.shape[1]) + ")");
  if (a.shape.numel() == 0 || b.shape.numel() == 0)
    throw ShapeError("matmul: " + shapes + ": empty operand");
  for (const TensorView* t : {&a, &b, &c})
    if (t->shape[0] > UINT32_MAX || t->shape[1] > UINT32_MAX)
      throw ShapeError("matmul: " + shapes + ": dims must fit 32 bits");
  checkFits("matmul", "a", a);
  checkFits("matmul", "b", b);
  checkFits("matmul", "c", c);
}

}  // namespace

const char* matmulVariantName(MatmulVariant variant) {
  switch (variant) {
    case MatmulVariant::Auto: return "auto";
    case MatmulVariant::Naive: return "naive";
  }
  return "?";
}

MatmulVariant matmulVariantFor(const vk::Context&) { return MatmulVariant::Naive; }

void matmul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& c,
            MatmulVariant variant) {
  checkShapes(a, b, c);
  vk::Context& context = rec.context();
  if (variant == MatmulVariant::Auto) variant = matmulVariantFor(context);
  const MatmulPush push{uint32_t(a.shape[0]), uint32_t(b.shape[1]), uint32_t(a.shape[1])};
  const vk::Arg args[] = {{*a.buffer, a.offset, a.bytes()},
                          {*b.buffer, b.offset, b.bytes()},
                          {*c.buffer, c.offset, c.bytes()}};
  switch (variant) {
    case MatmulVariant::Naive: {
      const vk::Kernel& kernel = context.kernels().get("matmul/naive", {16, 16});
      rec.dispatch(kernel, args, &push, sizeof(push), push.n, push.m);
      break;
    }
    case MatmulVariant::Auto: break;
  }
}

}  // namespace vkgrad::ops
