#include "vkgrad/onnx/fusions.h"

#include <algorithm>

#include "vkgrad/onnx/fusions/matcher.h"

namespace vkgrad::onnx {

bool FusionPlan::add(Fusion f) {
  std::sort(f.members.begin(), f.members.end());
  for (int i : f.members)
    if (skipped.count(i) || at.count(i)) return false;
  for (size_t k = 0; k + 1 < f.members.size(); ++k) skipped.insert(f.members[k]);
  const int last = f.members.back();
  at.emplace(last, std::move(f));
  return true;
}

const Fusion* FusionPlan::containing(int i) const {
  for (const auto& [last, f] : at)
    if (std::binary_search(f.members.begin(), f.members.end(), i)) return &f;
  return nullptr;
}

void FusionPlan::remove(int last) {
  const auto it = at.find(last);
  if (it == at.end()) return;
  for (int i : it->second.members) skipped.erase(i);
  at.erase(it);
}

// The larger patterns first: attention holds MatMuls the epilogues would otherwise take, and
// an epilogue takes in a GELU found before it.
FusionPlan findFusions(const Model& model) {
  FusionPlan plan;
  const Matcher m(model);
  findAttention(m, plan);
  findLayerNorm(m, plan);
  findGelu(m, plan);
  findMatmulEpilogues(m, plan);
  return plan;
}

}  // namespace vkgrad::onnx
