// gather: out[i] = table[ids[i]], rows copied on the device (ops/gather.h), so a batch is
// an index buffer. Its backward, for a trainable f32 table only, is a deterministic
// scatter-add (ops::gatherBackward).
#include <string>
#include <utility>

#include "vkgrad/ops/gather.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Gather {
  enum In { table, ids, status, kInputs };  // status: flags ids out of range (2 u32)
  enum Out { rows, kOutputs };
  struct Attrs {
    int64_t row_stride = 0;  // the table's row stride (a windows Dataset); 0: dense
  };
};

struct GatherBackward {
  enum In { ids, dout, status, kInputs };
  enum Out { dtable, scratch, kOutputs };  // scratch: u32, the bucket sort's
};

// dtable[v] = sum of dout rows whose id is v.
void backward(Backward& b, const Node& f) {
  if (!b.needs(f, Gather::table)) return;
  Graph& g = b.graph();
  const int ids = f.inputs[Gather::ids];
  const int64_t vocab = g.tensor(f.inputs[Gather::table]).shape[0];
  const int gid = b.gradOf(f.inputs[Gather::table]);
  const ops::Write mode = b.contribute(gid);
  const int scratch = b.temp({ops::gatherBackwardScratch(vocab, g.tensor(ids).shape.numel())},
                             "gather.scratch", DType::U32);
  Node node{OpKind::GatherBackward,
            {ids, b.dout(f, Gather::rows), f.inputs[Gather::status]},
            {gid, scratch},
            {mode, ops::Write::Overwrite}};
  g.addNode(std::move(node));
}

// The kernel moves 32-bit words without arithmetic, so u32 tables (labels) pass through it as
// f32 views, bits unchanged; tables and rows are seen as 2-D (rows, row elements).
void launch(const Launch& l) {
  ops::TensorView table = l.in(Gather::table), ids = l.in(Gather::ids), rows = l.out(Gather::rows);
  const int64_t row = table.shape.numel() / table.shape[0];
  table.shape = {table.shape[0], row};
  ids.shape = {ids.shape.numel()};
  rows.shape = {ids.shape[0], row};
  ops::gather(l.rec, ids, table, rows, l.in(Gather::status), l.attr<Gather::Attrs>().row_stride);
}

void launchBackward(const Launch& l) {
  using B = GatherBackward;
  ops::TensorView ids = l.in(B::ids), dout = l.in(B::dout), dtable = l.out(B::dtable);
  const int64_t row = dtable.shape.numel() / dtable.shape[0];
  ids.shape = {ids.shape.numel()};
  dout.shape = {ids.shape[0], row};
  dtable.shape = {dtable.shape[0], row};
  ops::gatherBackward(l.rec, ids, dout, dtable, l.out(B::scratch), l.in(B::status),
                      l.write(B::dtable));
}

}  // namespace

Tensor Graph::gather(Tensor table, Tensor ids) {
  check(table, "gather");
  check(ids, "gather");
  const TensorInfo& t = tensor(table);
  const DType dtype = t.dtype;
  const bool differentiable = t.differentiable && dtype == DType::F32;
  const Dataset* strided =
      t.kind == TensorKind::Dataset && t.dataset->row_stride > 0 ? t.dataset : nullptr;
  const Shape out = ops::gatherShape(t.shape, shape(ids), tensor(ids).dtype, "gather");
  if (t.shape[0] > int64_t(UINT32_MAX) ||
      (strided ? strided->extent() : t.shape.numel()) > int64_t(UINT32_MAX))
    throw ShapeError(describe("gather", {table, ids}) + ": the table exceeds 32-bit indexing");
  const int status = statusTensor("gather.status");
  const int y = output(out, dtype, differentiable);
  addNode({OpKind::Gather,
           {table.id, ids.id, status},
           {y},
           {},
           Gather::Attrs{strided ? strided->row_stride : 0}});
  return {y};
}

namespace defs {
const OpDef kGather{.name = "gather",
                    .inputs = Gather::kInputs,
                    .outputs = Gather::kOutputs,
                    .strided_input = Gather::table,
                    .backward = backward,
                    .launch = launch};
const OpDef kGatherBackward{.name = "gatherBackward",
                            .inputs = GatherBackward::kInputs,
                            .outputs = GatherBackward::kOutputs,
                            .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
