#include "vkgrad/ops/rope.h"

#include <cmath>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

struct RopePush {
  uint32_t pairs;    // B * T * H * D / 2
  uint32_t t, h;     // T, H
  uint32_t half_d;   // D / 2
  uint32_t rotated;  // heads that turn, the first of each (b, t); the rest are copied
  uint32_t x_skip, inv_freq_skip, position_skip, y_skip;  // first elements inside the bindings
};
static_assert(sizeof(RopePush) == 36);

}  // namespace

std::vector<float> ropeInvFreq(int64_t d, float theta) {
  if (d < 2 || d % 2 != 0)
    throw ShapeError("rope: the head size D must be even and >= 2, got " + std::to_string(d));
  if (!std::isfinite(theta) || !(theta > 1.0f))
    throw ShapeError("rope: theta must be finite and > 1, got " + std::to_string(theta));
  std::vector<float> inv(size_t(d / 2));
  for (int64_t i = 0; i < d / 2; ++i) {
    // PyTorch: arange(0, D, 2).float() / D in f32, theta ** that in f32, 1 / that in f32.
    const float exponent = float(2 * i) / float(d);
    const float power = float(std::pow(double(theta), double(exponent)));
    inv[size_t(i)] = 1.0f / power;
  }
  return inv;
}

void ropeCheckShapes(const Shape& x, const Shape* position, int64_t rotated_heads) {
  const std::string op = "rope: x " + x.str();
  if (x.rank() != 4) throw ShapeError(op + " must be (B,T,H,D)");
  if (x.numel() == 0) throw ShapeError(op + " is empty");
  if (x.back() % 2 != 0) throw ShapeError(op + " needs an even head size D");
  if (x.numel() > INT32_MAX) throw ShapeError(op + ": more than 2^31 elements");
  if (position && !(*position == Shape{1}))
    throw ShapeError(op + " needs position (1), got " + position->str());
  if (rotated_heads != -1 && (rotated_heads < 1 || rotated_heads > x[2]))
    throw ShapeError(op + ": rotated heads must be 1.." + std::to_string(x[2]) + ", got " +
                     std::to_string(rotated_heads));
}

void rope(vk::Recorder& rec, const TensorView& x, const TensorView& inv_freq,
          const TensorView& position, const TensorView& y, bool inverse, Write w,
          int64_t rotated_heads) {
  const char* name = inverse ? "ropeBackward" : "rope";
  const bool has_position = position.buffer != nullptr;
  ropeCheckShapes(x.shape, has_position ? &position.shape : nullptr, rotated_heads);
  const std::string op = std::string(name) + ": x " + x.shape.str();
  if (!(y.shape == x.shape)) throw ShapeError(op + " needs y shaped like x, got " + y.shape.str());
  if (!(inv_freq.shape == Shape{x.shape.back() / 2}))
    throw ShapeError(op + " needs inv_freq (" + std::to_string(x.shape.back() / 2) + "), got " +
                     inv_freq.shape.str());
  checkFloatOperand(name, "x", x);
  checkFloatOperand(name, "y", y);
  checkOperand(name, "inv_freq", inv_freq);
  if (has_position) checkFits(name, "position", position, DType::U32);
  const bool accumulate = w == Write::Accumulate;
  checkAlias(name, "y", y, "x", x, !accumulate);
  checkInPlaceDtype(name, "y", y, "x", x);
  checkAlias(name, "y", y, "inv_freq", inv_freq, false);
  if (has_position) checkAlias(name, "y", y, "position", position, false);
  vk::Context& ctx = rec.context();
  const uint64_t pairs = uint64_t(x.shape.numel() / 2);
  const Bound bx = bindStorage(ctx, x), bf = bindStorage(ctx, inv_freq), by = bindStorage(ctx, y);
  // Without a position the binding is a placeholder (inv_freq's) that the kernel never reads.
  const Bound bp = has_position ? bindStorage(ctx, position) : bf;
  const RopePush push{uint32_t(pairs),
                      uint32_t(x.shape[1]),
                      uint32_t(x.shape[2]),
                      uint32_t(x.shape[3] / 2),
                      uint32_t(rotated_heads < 0 ? x.shape[2] : rotated_heads),
                      bx.skip,
                      bf.skip,
                      has_position ? bp.skip : 0u,
                      by.skip};
  const vk::Kernel& kernel = floatKernel(ctx, "rope/rope",
                                         {{"local_size_x", workgroupSize(ctx)},
                                          {"kInverse", inverse},
                                          {"kPosition", has_position},
                                          {"kAccumulate", accumulate}},
                                         {{"x_dtype", x.dtype}, {"y_dtype", y.dtype}});
  const vk::Arg args[] = {bx.arg, bf.arg, bp.arg, by.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), gridGroups(ctx, pairs, workgroupSize(ctx)));
}

}  // namespace vkgrad::ops
