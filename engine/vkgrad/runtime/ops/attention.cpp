// attention: flash attention (ops/attention.h), softmax(scale q kᵀ [+ causal mask]) v per
// batch and head, saving each row's log-sum-exp for the backward, which writes dq, dk and dv
// in one kernel. Fused: q, k and v are column blocks of one (B,T,3*H*D) tensor, read in
// place (the kernels take a row stride), and their gradients land in one gradient the same way.
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/ops/attention.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Attention {
  enum In { q, k, v, kInputs };   // fused: all three are the qkv tensor
  enum Out { o, lse, kOutputs };  // o (B,Tq,H,D) or fused (B,T,H*D); lse (B,H,Tq)
  struct Attrs {
    int64_t heads = 0, head_dim = 0;
    bool fused = false, causal = false;
    float scale = 0.0f;  // 0: 1/sqrt(D)
  };
};

struct AttentionBackward {
  enum In { q, k, v, o, lse, dout, kInputs };
  enum Out { dq, dk, dv, scratch, kOutputs };  // fused: dq, dk, dv are one tensor
  using Attrs = Attention::Attrs;
};

// One of attention's (B,T,H,D) operands. A fused node's q, k, v (and their gradients) are
// column blocks `part` of a (B,T,3*H*D) tensor, rows 3*H*D apart; o and dout are packed (-1).
ops::AttentionTensor operand(ops::TensorView t, const Attention::Attrs& at, int part) {
  const int64_t h = at.heads, d = at.head_dim;
  ops::AttentionTensor a;
  a.view = t;
  a.view.shape = {t.shape[0], t.shape[1], h, d};
  if (at.fused && part >= 0) {
    a.view.offset += uint64_t(part * h * d) * ops::dtypeBytes(t.dtype);
    a.row_stride = 3 * h * d;
  }
  return a;
}

// The kernel overwrites dq, dk and dv. A gradient this is not the first contribution to
// (q, k, v sharing a tensor, or one used elsewhere too) goes through a temporary that is then
// added in.
void backward(Backward& b, const Node& f) {
  Graph& g = b.graph();
  const auto& at = f.attr<Attention::Attrs>();
  std::vector<std::pair<int, int>> addins;  // (temporary, gradient)
  std::vector<ops::Write> addin_modes;
  auto target = [&](int in) {
    const int input = f.inputs[size_t(in)];
    const Shape shape = g.tensor(input).shape;  // a copy: temp() adds tensors
    if (!b.needs(f, in)) return b.temp(shape, "attention.d_unused");
    const int gid = b.gradOf(input);
    const ops::Write mode = b.contribute(gid);
    if (mode == ops::Write::Overwrite) return gid;
    const int t = b.temp(shape, "attention.dpart");
    addins.push_back({t, gid});
    addin_modes.push_back(mode);
    return t;
  };
  int outs[3];
  if (at.fused) {
    outs[0] = outs[1] = outs[2] = target(Attention::q);
  } else {
    for (int in : {Attention::q, Attention::k, Attention::v}) outs[in] = target(in);
  }
  const Shape so = g.tensor(f.outputs[Attention::o]).shape;  // (B, Tq, ...)
  const int scratch = b.temp({so[0] * at.heads * so[1]}, "attention.scratch");
  Node node{OpKind::AttentionBackward,
            {f.inputs[Attention::q], f.inputs[Attention::k], f.inputs[Attention::v],
             f.outputs[Attention::o], f.outputs[Attention::lse], b.dout(f, Attention::o)},
            {outs[0], outs[1], outs[2], scratch},
            std::vector<ops::Write>(AttentionBackward::kOutputs, ops::Write::Overwrite),
            at};
  g.addNode(std::move(node));
  for (size_t i = 0; i < addins.size(); ++i)
    b.addInto(addins[i].first, addins[i].second, addin_modes[i]);
}

void launch(const Launch& l) {
  using F = Attention;
  const auto& at = l.attr<F::Attrs>();
  const ops::AttentionOptions options{at.causal, at.scale};
  ops::attention(l.rec, operand(l.in(F::q), at, 0), operand(l.in(F::k), at, 1),
                 operand(l.in(F::v), at, 2), operand(l.out(F::o), at, -1), l.out(F::lse), options);
}

void launchBackward(const Launch& l) {
  using B = AttentionBackward;
  const auto& at = l.attr<B::Attrs>();
  const ops::AttentionOptions options{at.causal, at.scale};
  ops::attentionBackward(l.rec, operand(l.in(B::q), at, 0), operand(l.in(B::k), at, 1),
                         operand(l.in(B::v), at, 2), operand(l.in(B::o), at, -1), l.in(B::lse),
                         operand(l.in(B::dout), at, -1), operand(l.out(B::dq), at, 0),
                         operand(l.out(B::dk), at, 1), operand(l.out(B::dv), at, 2),
                         l.out(B::scratch), options, l.write(B::dq));
}

}  // namespace

Tensor Graph::attention(Tensor q, Tensor k, Tensor v, bool causal, float scale) {
  check(q, "attention");
  check(k, "attention");
  check(v, "attention");
  const Shape sq = shape(q);  // a copy: output() may move tensors_
  auto fail = [&](const std::string& why) {
    throw ShapeError(describe("attention", {q, k, v}) + ": " + why);
  };
  for (Tensor t : {q, k, v})
    if (tensor(t).dtype != DType::F32) fail("q, k and v must be f32");
  if (!(scale >= 0)) fail("scale must be >= 0 (0: 1/sqrt(D))");
  const Shape lse_shape = ops::attentionLseShape(sq, shape(k), shape(v));
  const int o = output(sq);
  const int lse = output(lse_shape, DType::F32, true, "attention.lse");
  addNode({OpKind::Attention,
           {q.id, k.id, v.id},
           {o, lse},
           {},
           Attention::Attrs{sq[2], sq[3], false, causal, scale}});
  return {o};
}

Tensor Graph::attention(Tensor qkv, int64_t heads, bool causal, float scale) {
  check(qkv, "attention");
  const Shape s = shape(qkv);  // a copy: output() may move tensors_
  auto fail = [&](const std::string& why) {
    throw ShapeError(describe("attention", {qkv}) + " with " + std::to_string(heads) +
                     " heads: " + why);
  };
  if (tensor(qkv).dtype != DType::F32) fail("qkv must be f32");
  if (s.rank() != 3) fail("qkv must be (B,T,3*H*D)");
  if (heads <= 0 || s[2] % (3 * heads) != 0) fail("the last dim must be a multiple of 3*heads");
  if (!(scale >= 0)) fail("scale must be >= 0 (0: 1/sqrt(D))");
  const int64_t d = s[2] / (3 * heads);
  const Shape per_head{s[0], s[1], heads, d};  // q, k and v as the kernels see them
  const Shape lse_shape = ops::attentionLseShape(per_head, per_head, per_head);
  const int o = output({s[0], s[1], heads * d});
  const int lse = output(lse_shape, DType::F32, true, "attention.lse");
  addNode({OpKind::Attention,
           {qkv.id, qkv.id, qkv.id},
           {o, lse},
           {},
           Attention::Attrs{heads, d, true, causal, scale}});
  return {o};
}

namespace defs {
const OpDef kAttention{.name = "attention",
                       .inputs = Attention::kInputs,
                       .outputs = Attention::kOutputs,
                       .f32_outputs = 1u << Attention::lse,
                       .backward = backward,
                       .launch = launch};
const OpDef kAttentionBackward{.name = "attentionBackward",
                               .inputs = AttentionBackward::kInputs,
                               .outputs = AttentionBackward::kOutputs,
                               .f32_outputs = 1u << AttentionBackward::scratch,
                               .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
