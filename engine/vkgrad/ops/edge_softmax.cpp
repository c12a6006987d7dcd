#include "vkgrad/ops/edge_softmax.h"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// Lanes per node on a GPU. On a CPU driver a workgroup of the subgroup's (SIMD) width is one
// subgroup, so the combine needs no barriers (common/reduce.glsl: ~2x on lavapipe), and most
// nodes have fewer incoming edges than even that.
constexpr uint32_t kGpuWorkgroup = 64;

struct ForwardPush {
  uint32_t nodes, edges, heads;
  uint32_t offsets_skip, scores_skip, alpha_skip;
};
static_assert(sizeof(ForwardPush) == 24);

struct BackwardPush {
  uint32_t nodes, edges, heads;
  uint32_t offsets_skip, alpha_skip, dalpha_skip, dscores_skip;
};
static_assert(sizeof(BackwardPush) == 28);

struct Layout {
  uint32_t group;
  bool one_subgroup;
};

Layout layoutFor(const vk::Context& ctx) {
  if (ctx.info().isCpu()) return {std::max(1u, ctx.info().subgroup_size), true};
  return {kGpuWorkgroup, false};
}

// Workgroups for N nodes of E edges: a workgroup grid-strides over nodes and, per node and
// head, its lanes make two passes over the node's edges, `group` at a time. On a CPU device
// enough workgroups that a lane of a graph of even in-degrees stays within llvmpipe's loop
// budget (rowGroups; 64 nodes of 4096 edges and 9 heads on 8 workgroups looped ~74,000 times
// per lane, past the 65535 at which llvmpipe silently ends an invocation). Offsets are device
// data, so a single node whose edges alone exceed the budget (E * H / group past ~16,000)
// cannot be seen here: that graph still truncates on llvmpipe.
uint32_t nodeGroups(const vk::Context& ctx, const Layout& l, uint64_t nodes, uint64_t edges,
                    uint64_t heads) {
  // Per node: the sum of each node's ceil(degree / group) is at most E / group + N.
  const uint64_t passes = (edges + nodes * l.group - 1) / (nodes * l.group) + 1;
  return rowGroups(ctx, nodes, heads * (2 * passes + 1) + 1);
}

// Checks everything shared by forward and backward; returns the node count.
int64_t checkEdges(const char* op, const TensorView& offsets, const TensorView& like,
                   std::initializer_list<std::pair<const char*, const TensorView*>> others) {
  edgeSoftmaxShape(op, offsets.shape, offsets.dtype, like.shape, like.dtype);
  for (const auto& [name, t] : others)
    if (!(t->shape == like.shape) || !isFloat(t->dtype))
      throw ShapeError(std::string(op) + ": " + name + " " + t->shape.str() + " " +
                       dtypeName(t->dtype) + " must be f32, f16 or bf16 shaped like " +
                       like.shape.str());
  checkFits(op, "offsets", offsets, DType::U32);
  return offsets.shape[0] - 1;
}

}  // namespace

Shape edgeSoftmaxShape(const char* op, const Shape& offsets, DType offsets_dtype,
                       const Shape& scores, DType scores_dtype) {
  const std::string at =
      std::string(op) + ": offsets " + offsets.str() + ", scores " + scores.str() + ": ";
  if (offsets_dtype != DType::U32) throw ShapeError(at + "offsets must be u32");
  if (!isFloat(scores_dtype)) throw ShapeError(at + "scores must be f32, f16 or bf16");
  if (offsets.rank() != 1 || offsets[0] < 2)
    throw ShapeError(at + "offsets must be (nodes + 1) with at least one node");
  if (offsets[0] > int64_t(UINT32_MAX)) throw ShapeError(at + "2^32 or more nodes");
  if (scores.rank() != 2 || scores.numel() == 0)
    throw ShapeError(at + "scores must be (edges, heads), non-empty");
  if (scores.numel() >= (int64_t(1) << 31)) throw ShapeError(at + "2^31 or more scores");
  return scores;
}

void edgeSoftmax(vk::Recorder& rec, const TensorView& offsets, const TensorView& scores,
                 const TensorView& alpha) {
  const char* op = "edgeSoftmax";
  const int64_t nodes = checkEdges(op, offsets, scores, {{"alpha", &alpha}});
  checkFloatOperand(op, "scores", scores);
  checkFloatOperand(op, "alpha", alpha);
  checkAlias(op, "alpha", alpha, "scores", scores, false);
  checkAlias(op, "alpha", alpha, "offsets", offsets, false);
  vk::Context& ctx = rec.context();
  const Layout l = layoutFor(ctx);
  const Bound bo = bindStorage(ctx, offsets), bs = bindStorage(ctx, scores),
              ba = bindStorage(ctx, alpha);
  const ForwardPush push{
      uint32_t(nodes), uint32_t(scores.shape[0]), uint32_t(scores.shape[1]), bo.skip, bs.skip,
      ba.skip};
  const vk::Arg args[] = {bo.arg, bs.arg, ba.arg};
  rec.dispatchGroups(floatKernel(ctx, "edge_softmax/forward",
                                 {{"local_size_x", l.group}, {"kOneSubgroup", l.one_subgroup}},
                                 {{"scores_dtype", scores.dtype}, {"alpha_dtype", alpha.dtype}}),
                     args, &push, sizeof(push),
                     nodeGroups(ctx, l, uint64_t(nodes), push.edges, push.heads));
}

void edgeSoftmaxBackward(vk::Recorder& rec, const TensorView& offsets, const TensorView& alpha,
                         const TensorView& dalpha, const TensorView& dscores, Write w) {
  const char* op = "edgeSoftmaxBackward";
  const int64_t nodes =
      checkEdges(op, offsets, alpha, {{"dalpha", &dalpha}, {"dscores", &dscores}});
  checkFloatOperand(op, "alpha", alpha);
  checkFloatOperand(op, "dalpha", dalpha);
  checkFloatOperand(op, "dscores", dscores);
  checkAlias(op, "dscores", dscores, "alpha", alpha, false);
  checkAlias(op, "dscores", dscores, "dalpha", dalpha, false);
  checkAlias(op, "dscores", dscores, "offsets", offsets, false);
  vk::Context& ctx = rec.context();
  const Layout l = layoutFor(ctx);
  const Bound bo = bindStorage(ctx, offsets), ba = bindStorage(ctx, alpha),
              bd = bindStorage(ctx, dalpha), bs = bindStorage(ctx, dscores);
  const BackwardPush push{uint32_t(nodes),
                          uint32_t(alpha.shape[0]),
                          uint32_t(alpha.shape[1]),
                          bo.skip,
                          ba.skip,
                          bd.skip,
                          bs.skip};
  const vk::Arg args[] = {bo.arg, ba.arg, bd.arg, bs.arg};
  rec.dispatchGroups(floatKernel(ctx, "edge_softmax/backward",
                                 {{"local_size_x", l.group},
                                  {"kOneSubgroup", l.one_subgroup},
                                  {"kAccumulate", w == Write::Accumulate}},
                                 {{"alpha_dtype", alpha.dtype},
                                  {"dalpha_dtype", dalpha.dtype},
                                  {"dscores_dtype", dscores.dtype}}),
                     args, &push, sizeof(push),
                     nodeGroups(ctx, l, uint64_t(nodes), push.edges, push.heads));
}

}  // namespace vkgrad::ops
