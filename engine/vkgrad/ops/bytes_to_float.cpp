#include "vkgrad/ops/bytes_to_float.h"

#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

struct BytesToFloatPush {
  uint32_t n_words;
  uint32_t words_skip, out_skip;  // first elements of the views inside their bindings
  float scale, shift;
};
static_assert(sizeof(BytesToFloatPush) == 20);

}  // namespace

Shape bytesToFloatShape(const Shape& words, DType words_dtype, const Shape& out) {
  const std::string at = "bytesToFloat: words " + words.str() + ", out " + out.str() + ": ";
  if (words_dtype != DType::U32)
    throw ShapeError(at + "words must be u32, got " + dtypeName(words_dtype));
  if (words.rank() < 1 || words.numel() == 0) throw ShapeError(at + "words must be non-empty");
  if (out.numel() != 4 * words.numel())
    throw ShapeError(at + "out must hold 4 x " + std::to_string(words.numel()) + " = " +
                     std::to_string(4 * words.numel()) + " elements");
  if (out[0] != words[0])
    throw ShapeError(at + "out's leading dim must be words' (" + std::to_string(words[0]) + ")");
  if (out.numel() > (int64_t(1) << 31)) throw ShapeError(at + "out has more than 2^31 elements");
  return out;
}

void bytesToFloat(vk::Recorder& rec, const TensorView& words, const TensorView& out, float scale,
                  float shift) {
  const char* op = "bytesToFloat";
  bytesToFloatShape(words.shape, words.dtype, out.shape);
  checkFits(op, "words", words, DType::U32);
  checkFloat(op, "out", out);
  checkAlias(op, "out", out, "words", words, false);
  vk::Context& ctx = rec.context();
  const Bound bw = bindStorage(ctx, words), bo = bindStorage(ctx, out);
  // 16-byte stores where out is f32 and starts on a whole vec4 of its binding.
  const bool vec4 = vec4Storable(ctx, out);
  const BytesToFloatPush push{uint32_t(words.shape.numel()), bw.skip, bo.skip, scale, shift};
  const vk::Arg args[] = {bw.arg, bo.arg};
  const vk::Kernel& kernel = floatKernel(ctx, "bytes_to_float/forward",
                                         {{"local_size_x", workgroupSize(ctx)}, {"kVec4", vec4}},
                                         {{"out_values_dtype", out.dtype}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(rec.context(), push.n_words, workgroupSize(rec.context())));
}

}  // namespace vkgrad::ops
