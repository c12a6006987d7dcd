// A product by a weight matrix and what follows it, onto the matmul with its epilogue
// (Graph::matmul's bias, matmulActivation, matmulAdd): MatMul(x, W) or Gemm(x, W, b), W
// through an optional Transpose (a PyTorch Linear's (out, in) weight in a training export:
// read transposed in place, no transpose pass), then an optional Add of a bias row, then
// either an activation (Relu, Sigmoid, Tanh or a GELU written out) or a residual Add.
#include <algorithm>

#include "vkgrad/onnx/fusions/matcher.h"
#include "vkgrad/onnx/node_context.h"

namespace vkgrad::onnx {
namespace {

struct Epilogue {
  int product = -1;    // the MatMul or Gemm node
  int transpose = -1;  // W = Transpose(w, perm (1,0)), read as w transposed
  int bias = -1;       // Add(product, bias)
  Operand bias_in;
  int act = -1;  // a one-node activation
  std::optional<ops::Activation> kind;
  const Fusion* gelu = nullptr;  // or a GELU pattern reading the product
  int residual = -1;             // Add(product, residual)
  Operand residual_in;
};

std::optional<ops::Activation> oneNodeActivation(const std::string& op) {
  if (op == "Relu") return ops::Activation::Relu;
  if (op == "Sigmoid") return ops::Activation::Sigmoid;
  if (op == "Tanh") return ops::Activation::Tanh;
  return {};
}

// Gemm as a plain product: alpha = beta = 1, A not transposed (B may be).
bool plainGemm(const ::onnx::NodeProto& n) {
  for (const auto& a : n.attribute()) {
    if ((a.name() == "alpha" || a.name() == "beta") && a.f() != 1.0f) return false;
    if (a.name() == "transA" && a.i() != 0) return false;
  }
  return true;
}

bool gemmTransB(const ::onnx::NodeProto& n) {
  for (const auto& a : n.attribute())
    if (a.name() == "transB") return a.i() != 0;
  return false;
}

// Emits the fused product; false (nothing added) where the shapes are not a row-wise product
// by a matrix with a bias row and a residual shaped like the product.
bool emitEpilogue(const Epilogue& e, FusionSite& s, int last) {
  NodeContext& p = s.node(e.product);
  const bool gemm = p.node.op_type() == "Gemm";
  NodeContext* wt = e.transpose >= 0 ? &s.node(e.transpose) : nullptr;
  for (int i = 0; i < p.inputCount(); ++i)  // (input 1 a member's output where transposed)
    if (p.has(i) && !(i == 1 && wt) && !isFloatType(p.value(i).type)) return false;
  if (wt && !isFloatType(wt->value(0).type)) return false;
  const std::vector<int64_t>& x = p.dims(0);
  const std::vector<int64_t>& w = wt ? wt->dims(0) : p.dims(1);
  const bool trans_b = (wt != nullptr) != (gemm && gemmTransB(p.node));
  if (x.size() < 2 || w.size() != 2 || (gemm && x.size() != 2)) return false;
  const int64_t k = trans_b ? w[1] : w[0], n = trans_b ? w[0] : w[1];
  if (x.back() != k) return false;
  const std::vector<int64_t> row{n};
  NodeContext* bias = nullptr;
  int bias_slot = 0;
  if (gemm && p.has(2)) bias = &p, bias_slot = 2;
  if (e.bias >= 0) {
    if (bias) return false;  // Gemm's C and a second bias: not one row
    bias = &s.node(e.bias_in.node), bias_slot = e.bias_in.input;
  }
  std::vector<int64_t> out(x.begin(), x.end() - 1);
  out.push_back(n);
  NodeContext* res = e.residual >= 0 ? &s.node(e.residual_in.node) : nullptr;
  int res_slot = e.residual_in.input;
  if (bias && bias->dims(bias_slot) != row) {
    // The Add after the product is not a bias row: a residual, when nothing follows it.
    if (e.bias < 0 || res || e.kind || bias->dims(bias_slot) != out) return false;
    res = bias, res_slot = bias_slot, bias = nullptr;
  }
  if (res && (res->dims(res_slot) != out || !isFloatType(res->value(res_slot).type))) return false;

  graph::Graph& g = s.g;
  const int64_t rows = dimsNumel(x) / k;
  // The matmul takes (M,K) and (B,M,K) rows as they are; more axes are viewed as rows. (No
  // view where none is needed: a view between an applied activation and the product that
  // reads it would keep the activation's derivative out of that product's backward.)
  const bool as_is = x.size() <= 3;
  auto rowsOf = [&](graph::Tensor t) {
    return as_is ? t : g.reshape(t, graph::Shape{rows, g.shape(t)[g.shape(t).rank() - 1]});
  };
  const graph::Tensor a = rowsOf(p.tensor(0));
  const graph::Tensor b = wt ? wt->tensor(0) : p.tensor(1);
  const graph::Tensor bias_t = bias ? bias->tensor(bias_slot) : graph::Tensor{};
  graph::Tensor y;
  if (e.kind) {
    y = g.matmulActivation(a, b, bias_t, *e.kind, 0.0f, trans_b);
  } else if (res) {
    const graph::Tensor r = rowsOf(res->tensor(res_slot));
    y = g.matmulAdd(a, b, bias_t, r, trans_b);
  } else {
    y = g.matmul(a, b, bias_t, false, trans_b);
  }
  s.node(last).setDevice(0, as_is ? y : g.reshape(y, deviceShape(out)), out);
  return true;
}

// What follows product node i (writing `y`): a bias Add, then an activation or a residual.
Epilogue follow(const Matcher& m, const FusionPlan& plan, int i) {
  Epilogue e;
  e.product = i;
  const auto& p = *m.node(i);
  const bool gemm = p.op_type() == "Gemm";
  if (const auto t = m.inner(p.input(1), "Transpose");
      t && m.ints(*t, "perm") == std::vector<int64_t>{1, 0} && !plan.containing(*t))
    e.transpose = *t;
  std::string y = p.output(0);
  if (!gemm || p.input_size() < 3) {
    if (const auto add = m.consumer(y, "Add"); add && !plan.containing(*add)) {
      e.bias = *add;
      e.bias_in = {*add, m.node(*add)->input(0) == y ? 1 : 0};
      y = m.node(*add)->output(0);
    }
  }
  if (m.isGraphOutput(y)) return e;
  const auto& readers = m.readers(y);
  if (readers.size() == 1 && !plan.containing(readers[0])) {
    const auto& r = *m.node(readers[0]);
    if (const auto kind = oneNodeActivation(r.op_type()); kind && r.input_size() == 1) {
      e.act = readers[0], e.kind = kind;
    } else if (r.op_type() == "Add" && m.consumer(y, "Add") && r.input(0) != r.input(1)) {
      e.residual = readers[0];
      e.residual_in = {readers[0], r.input(0) == y ? 1 : 0};
    }
    return e;
  }
  // A GELU written out reads y several times, all inside its pattern.
  if (readers.empty()) return e;
  const Fusion* f = plan.containing(readers[0]);
  if (!f || !f->activation || f->activation->reads != y) return e;
  for (int r : readers)
    if (!std::binary_search(f->members.begin(), f->members.end(), r)) return e;
  e.gelu = f, e.kind = f->activation->kind;
  return e;
}

}  // namespace

void findMatmulEpilogues(const Matcher& m, FusionPlan& plan) {
  for (int i = 0; i < m.nodeCount(); ++i) {
    const std::string& op = m.node(i)->op_type();
    if ((op != "MatMul" && op != "Gemm") || plan.containing(i)) continue;
    if (op == "Gemm" && !plainGemm(*m.node(i))) continue;
    Epilogue e = follow(m, plan, i);
    std::vector<int> own{i};
    for (int n : {e.transpose, e.bias, e.act, e.residual})
      if (n >= 0) own.push_back(n);
    if (own.size() == 1 && !e.gelu) continue;  // nothing to fuse
    Fusion f;
    f.members = own;
    std::string what = op == "Gemm" ? "Gemm" : "MatMul";
    if (e.transpose >= 0) what += " of a transposed weight";
    if (e.bias >= 0) what += " + bias";
    if (e.kind) what += std::string(" + ") + ops::activationName(*e.kind);
    if (e.residual >= 0) what += " + residual";
    std::function<bool(FusionSite&)> inner_emit;
    if (e.gelu) {
      // The GELU pattern's members join this one; it is emitted on its own if the product's
      // checks fail.
      const int gelu_last = e.gelu->members.back();
      f.members.insert(f.members.end(), e.gelu->members.begin(), e.gelu->members.end());
      inner_emit = e.gelu->emit;
      f.constants = e.gelu->constants;
      e.gelu = nullptr;  // removed from the plan next
      plan.remove(gelu_last);
    }
    const int last = *std::max_element(f.members.begin(), f.members.end());
    f.description = what + " ending at node " + m.label(last) + " (the matmul's epilogue)";
    f.emit = [e, last, own, inner_emit](FusionSite& s) {
      if (emitEpilogue(e, s, last)) return true;
      if (!inner_emit) return false;
      std::vector<int> sorted = own;
      std::sort(sorted.begin(), sorted.end());
      for (int n : sorted) s.import(n);
      return inner_emit(s);
    };
    plan.add(std::move(f));
  }
}

}  // namespace vkgrad::onnx
