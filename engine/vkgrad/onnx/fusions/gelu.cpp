// GELU written out, as exporters write it, onto the one activation (ops/activation.h).
#include <algorithm>
#include <cmath>
#include <numbers>

#include "vkgrad/onnx/fusions/matcher.h"
#include "vkgrad/onnx/node_context.h"

namespace vkgrad::onnx {
namespace {

// One activation of x (read by the pattern's member x.node) at the pattern's last node.
Fusion activationFusion(const Matcher& m, std::string what, std::vector<int> members,
                        ops::Activation kind, const std::string& x) {
  Fusion f;
  f.members = std::move(members);
  const int last = *std::max_element(f.members.begin(), f.members.end());
  f.description = what + " ending at node " + m.label(last);
  const Operand in = m.find(f.members, x);
  f.emit = [in, last, kind](FusionSite& s) {
    NodeContext& reader = s.node(in.node);
    const graph::Tensor t = reader.tensor(in.input);
    s.node(last).setDevice(0, s.g.activation(t, kind), reader.dims(in.input));
    return true;
  };
  f.activation = Fusion::Applied{kind, x};
  f.constants = m.externals(f.members, {x});
  return f;
}

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
  std::optional<int> half;
  const std::string& out1 = n1.output(0);
  if (*o1 == x) {
    const auto mul2 = m.consumer(out1, "Mul");
    if (mul2 && m.withConstant(*mul2, out1, 0.5)) last = *mul2;
  } else if (half = m.inner(*o1, "Mul"); half) {
    // (x * 0.5) * (1 + erf): the Mul by 0.5 came first.
    if (m.withConstant(*half, x, 0.5)) last = *mul1;
  }
  if (last < 0) return;
  std::vector<int> members{first, erf, add, *mul1};
  if (half) members.push_back(*half);
  if (last != *mul1) members.push_back(last);
  plan.add(activationFusion(m, "GELU (erf form)", members, ops::Activation::GeluErf, x));
}

// x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), as PyTorch writes it: Mul(x,x) -> Mul(x,.)
// (or Pow(x,3)) -> Mul 0.044715 -> Add x -> Mul sqrt(2/pi) -> Tanh -> Add 1 -> Mul x -> Mul 0.5.
void geluTanh(const Matcher& m, int tanh, FusionPlan& plan) {
  const double k = std::sqrt(2.0 / std::numbers::pi);
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
  std::vector<int> members{cubic_scale, *sum, *scale, tanh, *add, *mul1, *mul2};
  members.insert(members.end(), cube.begin(), cube.end());
  plan.add(activationFusion(m, "GELU (tanh form)", members, ops::Activation::GeluTanh, x));
}

}  // namespace

void findGelu(const Matcher& m, FusionPlan& plan) {
  for (int i = 0; i < m.nodeCount(); ++i) {
    if (plan.containing(i)) continue;
    if (m.node(i)->op_type() == "Erf") geluErf(m, i, plan);
    if (m.node(i)->op_type() == "Tanh") geluTanh(m, i, plan);
  }
}

}  // namespace vkgrad::onnx
