#include "vkgrad/onnx/fusions.h"

#include <onnx/onnx_pb.h>

#include <cmath>
#include <cstring>
#include <optional>

namespace vkgrad::onnx {
namespace {

class Matcher {
 public:
  explicit Matcher(const Model& model) : model_(model), graph_(model.proto().graph()) {
    for (int i = 0; i < graph_.node_size(); ++i) {
      for (const auto& out : graph_.node(i).output()) producer_[out] = i;
      for (const auto& in : graph_.node(i).input()) ++uses_[in], consumers_[in].push_back(i);
    }
    for (const auto& out : graph_.output()) uses_[out.name()] += 2;  // never an inner value
  }

  const ::onnx::NodeProto* node(int i) const { return &graph_.node(i); }
  // The node that writes `value` when it is `op`, read by nothing else.
  std::optional<int> inner(const std::string& value, const char* op) const {
    const auto it = producer_.find(value);
    if (it == producer_.end() || graph_.node(it->second).op_type() != op) return {};
    if (uses_.count(value) == 0 || uses_.at(value) != 1) return {};
    return it->second;
  }
  // The one node that reads `value` when it is `op` (and nothing else reads it).
  std::optional<int> consumer(const std::string& value, const char* op) const {
    const auto it = consumers_.find(value);
    if (it == consumers_.end() || it->second.size() != 1 || uses_.at(value) != 1) return {};
    if (graph_.node(it->second[0]).op_type() != op) return {};
    return it->second[0];
  }
  // A one-element constant's value (a Constant node or a non-parameter initializer).
  std::optional<double> scalar(const std::string& value) const {
    if (const HostTensor* t = model_.initializer(value); t && t->numel() == 1) return t->at(0);
    const auto it = producer_.find(value);
    if (it == producer_.end() || graph_.node(it->second).op_type() != "Constant") return {};
    for (const auto& a : graph_.node(it->second).attribute()) {
      if (a.name() == "value_float") return a.f();
      if (a.name() == "value" && a.has_t()) {
        const auto& t = a.t();
        if (t.data_type() != ::onnx::TensorProto::FLOAT) return {};
        for (int64_t d : t.dims())
          if (d != 1) return {};
        if (t.float_data_size() == 1) return t.float_data(0);
        if (t.raw_data().size() == 4) {
          float f;
          std::memcpy(&f, t.raw_data().data(), 4);
          return f;
        }
      }
    }
    return {};
  }
  // For a binary node: the input that is not `value` (commutative ops), or nothing.
  static std::optional<std::string> other(const ::onnx::NodeProto& n, const std::string& value) {
    if (n.input_size() != 2) return {};
    if (n.input(0) == value) return n.input(1);
    if (n.input(1) == value) return n.input(0);
    return {};
  }
  bool near(std::optional<double> v, double want) const {
    return v && std::fabs(*v - want) <= 1e-5 * std::fabs(want);
  }
  // Mul/Add node i with one operand `value` and the other the constant `c`.
  bool withConstant(int i, const std::string& value, double c) const {
    const auto o = other(graph_.node(i), value);
    return o && near(scalar(*o), c);
  }

 private:
  const Model& model_;
  const ::onnx::GraphProto& graph_;
  std::map<std::string, int> producer_;
  std::map<std::string, int> uses_;
  std::map<std::string, std::vector<int>> consumers_;
};

// x * 0.5 * (1 + erf(x / sqrt 2)): Div(x, sqrt 2) or Mul(x, 1/sqrt 2) -> Erf -> Add 1 ->
// Mul x -> Mul 0.5 (the last two in either order).
void geluErf(const Matcher& m, int erf, FusionPlan& plan) {
  const auto& e = *m.node(erf);
  const auto scaled = m.inner(e.input(0), "Div");
  const auto scaled_mul = m.inner(e.input(0), "Mul");
  std::string x;
  int first = -1;
  if (scaled && m.near(m.scalar(m.node(*scaled)->input(1)), std::sqrt(2.0))) {
    x = m.node(*scaled)->input(0), first = *scaled;
  } else if (scaled_mul) {
    const auto& n = *m.node(*scaled_mul);
    for (int k = 0; k < 2 && first < 0; ++k)
      if (m.near(m.scalar(n.input(1 - k)), std::sqrt(0.5))) x = n.input(k), first = *scaled_mul;
  }
  if (first < 0) return;
  // erf(..) + 1
  const std::string& erf_out = e.output(0);
  const auto a = m.consumer(erf_out, "Add");
  if (!a || !m.withConstant(*a, erf_out, 1.0)) return;
  const int add = *a;
  const std::string& add_out = m.node(add)->output(0);
  // Two Muls: one by x, one by 0.5, in either order.
  const auto mul1 = m.consumer(add_out, "Mul");
  if (!mul1) return;
  const auto& n1 = *m.node(*mul1);
  const auto o1 = Matcher::other(n1, add_out);
  if (!o1) return;
  int last = -1;
  const std::string& out1 = n1.output(0);
  if (*o1 == x) {
    const auto mul2 = m.consumer(out1, "Mul");
    if (mul2 && m.withConstant(*mul2, out1, 0.5)) last = *mul2;
  } else if (const auto half = m.inner(*o1, "Mul"); half) {
    // (x * 0.5) * (1 + erf): the Mul by 0.5 came first.
    if (m.withConstant(*half, x, 0.5)) {
      last = *mul1;
      plan.skipped.insert(*half);
    }
  }
  if (last < 0) return;
  for (int i : {first, erf, add, *mul1})
    if (i != last) plan.skipped.insert(i);
  plan.at[last] = {"GELU (erf form) ending at node \"" + m.node(last)->name() + "\"",
                   ops::Activation::GeluErf, x};
}

// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as PyTorch writes it: Mul(x,x) -> Mul(x,.)
// (or Pow(x,3)) -> Mul 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh -> Add 1 -> Mul x -> Mul 0.5.
void geluTanh(const Matcher& m, int tanh, FusionPlan& plan) {
  const double k = std::sqrt(2.0 / M_PI);
  const auto& t = *m.node(tanh);
  const auto scale = m.inner(t.input(0), "Mul");
  if (!scale) return;
  std::string inner_sum;
  for (int i = 0; i < 2; ++i)
    if (m.near(m.scalar(m.node(*scale)->input(1 - i)), k)) inner_sum = m.node(*scale)->input(i);
  const auto sum = m.inner(inner_sum, "Add");
  if (inner_sum.empty() || !sum) return;
  // x + 0.044715 x^3: one Add operand is the Mul by 0.044715, the other x.
  std::string x;
  int cubic_scale = -1;
  for (int i = 0; i < 2 && cubic_scale < 0; ++i) {
    const auto c = m.inner(m.node(*sum)->input(i), "Mul");
    if (!c) continue;
    const auto& cn = *m.node(*c);
    for (int j = 0; j < 2; ++j)
      if (m.near(m.scalar(cn.input(1 - j)), 0.044715)) {
        cubic_scale = *c;
        x = m.node(*sum)->input(1 - i);
        inner_sum = cn.input(j);  // x^3
      }
  }
  if (cubic_scale < 0) return;
  std::vector<int> cube;
  if (const auto p = m.inner(inner_sum, "Pow");
      p && m.node(*p)->input(0) == x && m.near(m.scalar(m.node(*p)->input(1)), 3.0)) {
    cube = {*p};
  } else if (const auto m2 = m.inner(inner_sum, "Mul"); m2) {
    const auto sq = Matcher::other(*m.node(*m2), x);
    const auto m1 = sq ? m.inner(*sq, "Mul") : std::nullopt;
    if (!m1 || m.node(*m1)->input(0) != x || m.node(*m1)->input(1) != x) return;
    cube = {*m1, *m2};
  } else {
    return;
  }
  const std::string& t_out = t.output(0);
  const auto add = m.consumer(t_out, "Add");
  if (!add || !m.withConstant(*add, t_out, 1.0)) return;
  const std::string& add_out = m.node(*add)->output(0);
  const auto mul1 = m.consumer(add_out, "Mul");
  if (!mul1 || Matcher::other(*m.node(*mul1), add_out) != x) return;
  const std::string& out1 = m.node(*mul1)->output(0);
  const auto mul2 = m.consumer(out1, "Mul");
  if (!mul2 || !m.withConstant(*mul2, out1, 0.5)) return;
  for (int i : cube) plan.skipped.insert(i);
  for (int i : {cubic_scale, *sum, *scale, tanh, *add, *mul1}) plan.skipped.insert(i);
  plan.at[*mul2] = {"GELU (tanh form) ending at node \"" + m.node(*mul2)->name() + "\"",
                    ops::Activation::GeluTanh, x};
}

}  // namespace

FusionPlan findFusions(const Model& model) {
  FusionPlan plan;
  const Matcher m(model);
  const auto& nodes = model.proto().graph().node();
  for (int i = 0; i < nodes.size(); ++i) {
    if (plan.skipped.count(i)) continue;
    if (nodes[i].op_type() == "Erf") geluErf(m, i, plan);
    if (nodes[i].op_type() == "Tanh") geluTanh(m, i, plan);
  }
  return plan;
}

}  // namespace vkgrad::onnx
