// attention: flash attention (ops/attention.h), softmax(scale q kᵀ [+ causal mask]) v per
// batch and head, saving each row's log-sum-exp for the backward, which writes dq, dk and dv
// in one kernel. Fused: q, k and v are column blocks of one (B,T,(H+2*Hkv)*D) tensor, read
// in place (the kernels take a row stride), and their gradients land in one gradient the same
// way. Grouped-query attention (Hkv < H key/value heads) is the kernels' own.
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
    int64_t heads = 0, kv_heads = 0, head_dim = 0;  // kv_heads: k's and v's (dividing heads)
    bool fused = false, causal = false;
    float scale = 0.0f;  // 0: 1/sqrt(D)
  };
};

struct AttentionBackward {
  enum In { q, k, v, o, lse, dout, kInputs };
  enum Out { dq, dk, dv, scratch, kOutputs };  // fused: dq, dk, dv are one tensor
  using Attrs = Attention::Attrs;
};

// One of attention's (B,T,H,D) operands (k, v and their gradients: (B,T,Hkv,D)). A fused
// node's q, k, v (and their gradients) are column blocks `part` (0, 1, 2) of a
// (B,T,(H+2*Hkv)*D) tensor, [q heads | k heads | v heads] in each row; o and dout are packed
// (-1).
ops::AttentionTensor operand(ops::TensorView t, const Attention::Attrs& at, int part) {
  const int64_t d = at.head_dim, heads = part == 1 || part == 2 ? at.kv_heads : at.heads;
  ops::AttentionTensor a;
  a.view = t;
  a.view.shape = {t.shape[0], t.shape[1], heads, d};
  if (at.fused && part >= 0) {
    const int64_t first_head = part == 0 ? 0 : at.heads + (part - 1) * at.kv_heads;
    a.view.offset += uint64_t(first_head * d) * ops::dtypeBytes(t.dtype);
    a.row_stride = (at.heads + 2 * at.kv_heads) * d;
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
           Attention::Attrs{sq[2], shape(k)[2], sq[3], false, causal, scale}});
  return {o};
}

Tensor Graph::attention(Tensor qkv, int64_t heads, bool causal, float scale) {
  return attention(qkv, heads, heads, causal, scale);
}

Tensor Graph::attention(Tensor qkv, int64_t heads, int64_t kv_heads, bool causal, float scale) {
  check(qkv, "attention");
  const Shape s = shape(qkv);  // a copy: output() may move tensors_
  auto fail = [&](const std::string& why) {
    throw ShapeError(describe("attention", {qkv}) + " with " + std::to_string(heads) + " heads" +
                     (kv_heads != heads ? " and " + std::to_string(kv_heads) + " key/value heads"
                                        : std::string()) +
                     ": " + why);
  };
  if (tensor(qkv).dtype != DType::F32) fail("qkv must be f32");
  if (s.rank() != 3) fail("qkv must be (B,T,(H+2*Hkv)*D)");
  if (heads <= 0 || kv_heads <= 0 || heads % kv_heads != 0)
    fail("the key/value heads must divide the query heads");
  if (s[2] % (heads + 2 * kv_heads) != 0)
    fail(kv_heads == heads ? "the last dim must be a multiple of 3*heads"
                           : "the last dim must be a multiple of heads + 2*kv_heads");
  if (!(scale >= 0)) fail("scale must be >= 0 (0: 1/sqrt(D))");
  const int64_t d = s[2] / (heads + 2 * kv_heads);
  // q and k, v as the kernels see them.
  const Shape per_head{s[0], s[1], heads, d}, kv{s[0], s[1], kv_heads, d};
  const Shape lse_shape = ops::attentionLseShape(per_head, kv, kv);
  const int o = output({s[0], s[1], heads * d});
  const int lse = output(lse_shape, DType::F32, true, "attention.lse");
  addNode({OpKind::Attention,
           {qkv.id, qkv.id, qkv.id},
           {o, lse},
           {},
           Attention::Attrs{heads, kv_heads, d, true, causal, scale}});
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
