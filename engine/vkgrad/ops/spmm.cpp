#include "vkgrad/ops/spmm.h"

#include <algorithm>
#include <string>

#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

constexpr uint32_t kWorkgroup = 64;

struct AggregatePush {
  uint32_t rows, cols, head_cols, heads;
  uint32_t skip[6];  // offsets, nodes, edge_ids, weights, x, y
};
static_assert(sizeof(AggregatePush) == 40);

struct WeightsPush {
  uint32_t edges, cols, head_cols, heads;
  uint32_t skip[5];  // sources, destinations, x, dy, dw
};
static_assert(sizeof(WeightsPush) == 36);

std::string describe(const char* op,
                     std::initializer_list<std::pair<const char*, const TensorView*>> ts) {
  std::string s = op;
  s += ":";
  bool first = true;
  for (const auto& [name, t] : ts) {
    if (!t->buffer) continue;
    s += (first ? " " : ", ") + std::string(name) + " " + t->shape.str();
    first = false;
  }
  return s;
}

void checkIndices(const char* op, const char* name, const TensorView& t) {
  if (t.shape.numel() < 1)
    throw ShapeError(std::string(op) + ": " + name + " " + t.shape.str() + " is empty");
  checkFits(op, name, t, DType::U32);
}

// The one kernel of both directions: rows of `out` gathered along offsets' edge lists.
void aggregate(vk::Recorder& rec, const char* op, bool indirect, const TensorView& offsets,
               const char* nodes_name, const TensorView& nodes, const TensorView& edge_ids,
               const TensorView& weights, const char* in_name, const TensorView& in,
               const char* out_name, const TensorView& out, Write w) {
  const std::string at = describe(op, {{"offsets", &offsets},
                                       {nodes_name, &nodes},
                                       {"weights", &weights},
                                       {in_name, &in},
                                       {out_name, &out}});
  checkIndices(op, "offsets", offsets);
  checkIndices(op, nodes_name, nodes);
  if (indirect) {
    checkIndices(op, "t_edges", edge_ids);
    if (edge_ids.shape.numel() != nodes.shape.numel())
      throw ShapeError(at + ", t_edges " + edge_ids.shape.str() + ": t_edges and " + nodes_name +
                       " must both hold one word per edge");
  }
  const int64_t rows = offsets.shape.numel() - 1, edges = nodes.shape.numel();
  if (in.shape.rank() != 2) throw ShapeError(at + ": " + in_name + " must be (N, F)");
  const int64_t heads =
      spmmHeads(op, rows, edges, in.shape, weights.buffer ? &weights.shape : nullptr);
  if (!(out.shape == in.shape))
    throw ShapeError(at + ": " + out_name + " must have the shape of " + in_name);
  checkFloatOperand(op, in_name, in);
  checkFloatOperand(op, out_name, out);
  checkAlias(op, out_name, out, in_name, in, false);
  if (weights.buffer) {
    checkFloatOperand(op, "weights", weights);
    checkAlias(op, out_name, out, "weights", weights, false);
  }
  vk::Context& ctx = rec.context();
  const int64_t cols = in.shape[1];
  // Within 4 storage buffers the ".sb4" builds read the index arrays through texel views.
  const bool four = fewerStorageBuffers(ctx, 6);
  const Bound bo = bindInput(ctx, offsets, four, false, op, "offsets"),
              bn = bindInput(ctx, nodes, four, false, op, nodes_name),
              be = indirect ? bindInput(ctx, edge_ids, four, false, op, "t_edges")
                            : bn,                            // unread without kIndirect
      bw = bindStorage(ctx, weights.buffer ? weights : in),  // unread without kWeighted
      bx = bindStorage(ctx, in), by = bindStorage(ctx, out);
  const AggregatePush push{uint32_t(rows),
                           uint32_t(cols),
                           uint32_t(cols / heads),
                           uint32_t(heads),
                           {bo.skip, bn.skip, be.skip, bw.skip, bx.skip, by.skip}};
  const vk::Arg args[] = {bo.arg, bn.arg, be.arg, bw.arg, bx.arg, by.arg};
  // 4 features per invocation where they share a head, x, y start on whole vec4s and every
  // float tensor is f32 (the vec4 kernel reads them as f32 words).
  const TensorView& w_arg = weights.buffer ? weights : in;
  const bool all_f32 =
      in.dtype == DType::F32 && out.dtype == DType::F32 && w_arg.dtype == DType::F32;
  const uint32_t width =
      all_f32 && push.head_cols % 4 == 0 && bx.skip % 4 == 0 && by.skip % 4 == 0 ? 4 : 1;
  const vk::SpecConstants constants{{"local_size_x", kWorkgroup},
                                    {"kIndirect", indirect},
                                    {"kWeighted", weights.buffer != nullptr},
                                    {"kAccumulate", w == Write::Accumulate}};
  const vk::Kernel& kernel =
      width == 4
          ? ctx.kernels().get(four ? "spmm/aggregate4.sb4" : "spmm/aggregate4", constants)
          : floatKernel(ctx, four ? "spmm/aggregate.sb4" : "spmm/aggregate", constants,
                        {{"w_dtype", w_arg.dtype}, {"x_dtype", in.dtype}, {"y_dtype", out.dtype}});
  // An invocation loops over its rows' edges: on a CPU device enough workgroups that a lane
  // of a graph of even in-degrees stays within llvmpipe's loop budget (itemGroups; 64 nodes of
  // 4200 edges and 512 features gave each lane 16 rows, ~67,000 loops, past the 65535 at which
  // llvmpipe silently ends an invocation). The host never sees the offsets, so a single node
  // of more than ~65,000 incoming edges still truncates there.
  const uint64_t steps = uint64_t(edges) / uint64_t(std::max<int64_t>(rows, 1)) + 2;
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     itemGroups(ctx, uint64_t(rows) * uint64_t(cols) / width, kWorkgroup, steps));
}

}  // namespace

int64_t spmmHeads(const char* op, int64_t nodes, int64_t edges, const Shape& x,
                  const Shape* weights) {
  const std::string at = std::string(op) + ": x " + x.str() +
                         (weights ? ", weights " + weights->str() : std::string()) + " over " +
                         std::to_string(nodes) + " nodes and " + std::to_string(edges) + " edges: ";
  if (x.rank() != 2 || x[0] != nodes || x[1] < 1)
    throw ShapeError(at + "x must be (" + std::to_string(nodes) + ", F), one row per node");
  if (!weights) return 1;
  if (weights->rank() < 1 || weights->rank() > 2 || (*weights)[0] != edges)
    throw ShapeError(at + "weights must be (" + std::to_string(edges) + ") or (" +
                     std::to_string(edges) + ", H), one row per edge");
  const int64_t heads = weights->rank() == 2 ? (*weights)[1] : 1;
  if (heads < 1 || x[1] % heads != 0)
    throw ShapeError(at + "F = " + std::to_string(x[1]) +
                     " is not a multiple of H = " + std::to_string(heads));
  return heads;
}

void spmm(vk::Recorder& rec, const TensorView& offsets, const TensorView& sources,
          const TensorView& weights, const TensorView& x, const TensorView& y, Write w) {
  aggregate(rec, "spmm", false, offsets, "sources", sources, {}, weights, "x", x, "y", y, w);
}

void spmmTransposed(vk::Recorder& rec, const TensorView& t_offsets, const TensorView& t_edges,
                    const TensorView& t_destinations, const TensorView& weights,
                    const TensorView& dy, const TensorView& dx, Write w) {
  aggregate(rec, "spmmTransposed", true, t_offsets, "t_destinations", t_destinations, t_edges,
            weights, "dy", dy, "dx", dx, w);
}

void spmmWeightsBackward(vk::Recorder& rec, const TensorView& sources,
                         const TensorView& destinations, const TensorView& x, const TensorView& dy,
                         const TensorView& dw, Write w) {
  const char* op = "spmmWeightsBackward";
  const std::string at = describe(op, {{"sources", &sources},
                                       {"destinations", &destinations},
                                       {"x", &x},
                                       {"dy", &dy},
                                       {"dw", &dw}});
  checkIndices(op, "sources", sources);
  checkIndices(op, "destinations", destinations);
  const int64_t edges = dw.shape.rank() >= 1 ? dw.shape[0] : 0;
  if (sources.shape.numel() < edges || destinations.shape.numel() < edges)
    throw ShapeError(at + ": sources and destinations must hold a word for each of dw's " +
                     std::to_string(edges) + " edges");
  if (x.shape.rank() != 2) throw ShapeError(at + ": x must be (N, F)");
  const int64_t heads = spmmHeads(op, x.shape[0], edges, x.shape, &dw.shape);
  if (!(dy.shape == x.shape)) throw ShapeError(at + ": dy must have the shape of x");
  checkFloatOperand(op, "x", x);
  checkFloatOperand(op, "dy", dy);
  checkFloatOperand(op, "dw", dw);
  checkAlias(op, "dw", dw, "x", x, false);
  checkAlias(op, "dw", dw, "dy", dy, false);
  vk::Context& ctx = rec.context();
  const int64_t cols = x.shape[1];
  // Within 4 storage buffers the ".sb4" build reads the edge lists through texel views.
  const bool four = fewerStorageBuffers(ctx, 5);
  const Bound bs = bindInput(ctx, sources, four, false, op, "sources"),
              bd = bindInput(ctx, destinations, four, false, op, "destinations"),
              bx = bindStorage(ctx, x), bdy = bindStorage(ctx, dy), bw = bindStorage(ctx, dw);
  const WeightsPush push{uint32_t(edges),
                         uint32_t(cols),
                         uint32_t(cols / heads),
                         uint32_t(heads),
                         {bs.skip, bd.skip, bx.skip, bdy.skip, bw.skip}};
  const vk::Arg args[] = {bs.arg, bd.arg, bx.arg, bdy.arg, bw.arg};
  rec.dispatchGroups(
      floatKernel(ctx, four ? "spmm/weights_backward.sb4" : "spmm/weights_backward",
                  {{"local_size_x", kWorkgroup}, {"kAccumulate", w == Write::Accumulate}},
                  {{"x_dtype", x.dtype}, {"dy_dtype", dy.dtype}, {"dw_dtype", dw.dtype}}),
      args, &push, sizeof(push),
      // Each (edge, head) loops over the head's features (llvmpipe's budget as above).
      itemGroups(ctx, uint64_t(edges) * uint64_t(heads), kWorkgroup, push.head_cols + 1));
}

}  // namespace vkgrad::ops
