#include "vkgrad/runtime/precision.h"

#include <vector>

#include "vkgrad/runtime/parameters.h"

namespace vkgrad::graph {

const char* precisionName(Precision precision) {
  switch (precision) {
    case Precision::F32:
      return "fp32";
    case Precision::BF16:
      return "bf16";
    case Precision::F16:
      return "fp16";
  }
  return "?";
}

Precision parsePrecision(std::string_view text) {
  if (text == "fp32" || text == "f32") return Precision::F32;
  if (text == "bf16") return Precision::BF16;
  if (text == "fp16" || text == "f16") return Precision::F16;
  throw Error("precision \"" + std::string(text) + "\": use fp32, bf16 or fp16");
}

DType activationDtype(Precision precision) {
  switch (precision) {
    case Precision::BF16:
      return DType::BF16;
    case Precision::F16:
      return DType::F16;
    default:
      return DType::F32;
  }
}

namespace {

// Every float view takes its root's format.
void setViewDtypes(Graph& g) {
  for (size_t t = 0; t < g.tensors().size(); ++t) {
    const TensorInfo& info = g.tensor(int(t));
    if (info.root == int(t) || !ops::isFloat(info.dtype)) continue;
    const DType root = g.tensor(info.root).dtype;
    if (info.dtype != root) g.setDtype(int(t), root);
  }
}

}  // namespace

PrecisionSummary applyPrecision(Graph& g, Precision precision) {
  PrecisionSummary summary;
  const DType dtype = activationDtype(precision);
  const size_t n = g.tensors().size();
  // Parameters take the format their store keeps them in, whatever the policy.
  for (size_t t = 0; t < n; ++t) {
    const TensorInfo& info = g.tensor(int(t));
    if (info.kind != TensorKind::Parameter || info.root != int(t) ||
        info.dtype == info.parameter->dtype)
      continue;
    if (info.differentiable && info.parameter->dtype != DType::F32)
      throw Error("applyPrecision: parameter " + info.name + " is stored in " +
                  ops::dtypeName(info.parameter->dtype) +
                  " but this graph trains it (it took the parameter before it was frozen): "
                  "build the graph after setFrozen and setStorage");
    g.setDtype(int(t), info.parameter->dtype);
    ++summary.stored_parameters;
  }
  if (dtype == DType::F32) {
    if (summary.stored_parameters) setViewDtypes(g);
    return summary;
  }
  std::vector<bool> keep(n, false);
  for (const Node& node : g.nodes())
    for (size_t slot = 0; slot < node.outputs.size(); ++slot)
      if (node.outputs[slot] >= 0 && (node.def().f32_outputs >> slot) & 1u)
        keep[size_t(g.tensor(node.outputs[slot]).root)] = true;
  // Roots first, then every view takes its root's format.
  for (size_t t = 0; t < n; ++t) {
    const TensorInfo& info = g.tensor(int(t));
    if (info.root != int(t) || info.dtype != DType::F32) continue;
    const bool planned = info.kind == TensorKind::Activation ||
                         (info.kind == TensorKind::Gradient && !info.persistent);
    if (!planned) continue;
    if (keep[t]) {
      ++summary.kept_f32;
      continue;
    }
    g.setDtype(int(t), dtype);
    ++summary.sixteen_bit;
  }
  setViewDtypes(g);
  return summary;
}

}  // namespace vkgrad::graph
