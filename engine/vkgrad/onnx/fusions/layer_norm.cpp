// Layer norm written out, as PyTorch exports it before opset 17 (which has
// LayerNormalization), onto the layer-norm kernel (ops/layer_norm.h):
//   mean = ReduceMean(x, last axis); d = x - mean; var = ReduceMean(d^2, last axis)
//   y = d / Sqrt(var + eps) [* gamma] [+ beta]
// d^2 as Pow(d, 2) or Mul(d, d). The kernel computes the same function in one pass over
// each row (and its backward in one more), instead of nine elementwise and reduction passes.
#include <algorithm>

#include "vkgrad/onnx/fusions/matcher.h"
#include "vkgrad/onnx/node_context.h"

namespace vkgrad::onnx {
namespace {

// A ReduceMean over one axis with kept dims: that axis (from its attribute: axes are an
// input only from opset 18, which the importer does not take).
std::optional<int64_t> meanAxis(const Matcher& m, int i) {
  const auto& n = *m.node(i);
  if (n.input_size() != 1) return {};
  for (const auto& a : n.attribute())
    if (a.name() == "keepdims" && a.i() != 1) return {};
  const std::vector<int64_t> axes = m.ints(i, "axes");
  if (axes.size() != 1) return {};
  return axes[0];
}

struct LayerNorm {
  int mean = -1, sub = -1, square = -1, var = -1, add_eps = -1, sqrt = -1, div = -1;
  int scale = -1, shift = -1;  // the Mul by gamma and the Add of beta, when present
  Operand x, gamma, beta;
  float eps = 0.0f;
  int64_t mean_axis = 0, var_axis = 0;
};

bool emitLayerNorm(const LayerNorm& p, FusionSite& s, int last) {
  NodeContext& xs = s.node(p.x.node);
  const std::vector<int64_t>& x = xs.dims(p.x.input);
  const int rank = int(x.size());
  if (rank == 0 || !isFloatType(xs.value(p.x.input).type)) return false;
  for (int64_t axis : {p.mean_axis, p.var_axis})
    if (axis != -1 && axis != rank - 1) return false;
  const std::vector<int64_t> row{x.back()};
  for (const Operand& o : {p.gamma, p.beta})
    if (o.node >= 0 && s.node(o.node).dims(o.input) != row) return false;
  graph::Graph& g = s.g;
  const std::string name = s.node(last).node.output(0);
  auto param = [&](const Operand& o, float fill) {
    if (o.node >= 0) return s.node(o.node).tensor(o.input);
    return g.constant(name + (fill == 0.0f ? ".beta" : ".gamma"), deviceShape(row),
                      std::vector<float>(size_t(row[0]), fill));
  };
  const graph::Tensor gamma = param(p.gamma, 1.0f), beta = param(p.beta, 0.0f);
  s.node(last).setDevice(0, g.layerNorm(xs.tensor(p.x.input), gamma, beta, p.eps), x);
  return true;
}

void layerNormAt(const Matcher& m, int sqrt_node, FusionPlan& plan) {
  LayerNorm p;
  p.sqrt = sqrt_node;
  const auto& sq = *m.node(sqrt_node);
  const auto add = m.inner(sq.input(0), "Add");
  if (!add) return;
  p.add_eps = *add;
  std::optional<double> eps;
  std::string var_out;
  std::string eps_name;
  for (int k = 0; k < 2 && !eps; ++k)
    if ((eps = m.scalar(m.node(*add)->input(1 - k))))
      var_out = m.node(*add)->input(k), eps_name = m.node(*add)->input(1 - k);
  if (!eps || !(*eps >= 0)) return;
  p.eps = float(*eps);
  const auto var = m.inner(var_out, "ReduceMean");
  if (!var) return;
  p.var = *var;
  // d^2, and d = x - mean
  const std::string& squared = m.node(*var)->input(0);
  std::string d;
  if (const auto pw = m.inner(squared, "Pow"); pw && m.near(m.scalar(m.node(*pw)->input(1)), 2.0)) {
    p.square = *pw, d = m.node(*pw)->input(0);
  } else if (const auto mul = m.inner(squared, "Mul");
             mul && m.node(*mul)->input(0) == m.node(*mul)->input(1)) {
    p.square = *mul, d = m.node(*mul)->input(0);
  } else {
    return;
  }
  const auto sub = m.producer(d, "Sub");
  const auto div = m.consumer(sq.output(0), "Div");
  if (!sub || !div || m.node(*div)->input(0) != d || m.isGraphOutput(d)) return;
  const auto& readers = m.readers(d);
  if (readers.size() != 2 || std::count(readers.begin(), readers.end(), *div) != 1) return;
  p.sub = *sub, p.div = *div;
  const auto mean = m.inner(m.node(*sub)->input(1), "ReduceMean");
  if (!mean || m.node(*mean)->input(0) != m.node(*sub)->input(0)) return;
  p.mean = *mean;
  const auto mean_axis = meanAxis(m, p.mean), var_axis = meanAxis(m, p.var);
  if (!mean_axis || !var_axis) return;
  p.mean_axis = *mean_axis, p.var_axis = *var_axis;
  // The optional affine part: * gamma, then + beta.
  std::string y = m.node(*div)->output(0);
  if (const auto mul = m.consumer(y, "Mul"); mul && Matcher::other(*m.node(*mul), y)) {
    p.scale = *mul;
    y = m.node(*mul)->output(0);
    if (const auto shift = m.consumer(y, "Add"); shift && Matcher::other(*m.node(*shift), y))
      p.shift = *shift;
  }
  std::vector<int> members{p.mean, p.sub, p.square, p.var, p.add_eps, p.sqrt, p.div};
  for (int n : {p.scale, p.shift})
    if (n >= 0) members.push_back(n);
  p.x = m.find(members, m.node(*sub)->input(0));
  if (p.scale >= 0)
    p.gamma = m.find({p.scale}, *Matcher::other(*m.node(p.scale), m.node(p.div)->output(0)));
  if (p.shift >= 0)
    p.beta = m.find({p.shift}, *Matcher::other(*m.node(p.shift), m.node(p.scale)->output(0)));
  Fusion f;
  f.members = members;
  const int last = *std::max_element(members.begin(), members.end());
  f.description =
      "layer norm (" + std::to_string(members.size()) + " nodes) ending at node " + m.label(last);
  f.emit = [p, last](FusionSite& s) { return emitLayerNorm(p, s, last); };
  f.constants = {eps_name};
  plan.add(std::move(f));
}

}  // namespace

void findLayerNorm(const Matcher& m, FusionPlan& plan) {
  for (int i = 0; i < m.nodeCount(); ++i)
    if (m.node(i)->op_type() == "Sqrt" && !plan.containing(i)) layerNormAt(m, i, plan);
}

}  // namespace vkgrad::onnx
