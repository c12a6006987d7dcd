// The optimizer's nodes (training/optimizer.h): AdvanceStep, ClipGradNorm, and one SGD update per
// parameter or one AdamW update of every parameter (ops/optimizer.h). They update persistent
// tensors in place, so they are never pruned. Their slots are in ops/optimizer_nodes.h, shared
// with their only builder, addOptimizer (training/optimizer.cpp), which lives with the training
// code: the inference library (vkgrad::runtime) runs these nodes' kinds but cannot add them.
#include <cstring>
#include <limits>
#include <vector>

#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"
#include "vkgrad/runtime/ops/optimizer_nodes.h"

namespace vkgrad::graph {

using namespace nodes;

namespace {

void launchAdvance(const Launch& l) {
  ops::advanceStep(l.rec, l.in(AdvanceStep::state));
}

void launchClip(const Launch& l) {
  const size_t grads = l.node.inputs.size() - ClipGradNorm::kInputs;
  std::vector<ops::TensorView> views;
  for (size_t i = 0; i < grads; ++i) views.push_back(l.view(l.node.inputs[i]));
  auto fixed = [&](ClipGradNorm::In slot) { return l.view(l.node.inputs[grads + slot]); };
  ops::clipGradScale(l.rec, views, l.attr<ClipGradNorm::Attrs>().max_norm,
                     fixed(ClipGradNorm::scratch), fixed(ClipGradNorm::norm),
                     fixed(ClipGradNorm::state), l.out(ClipGradNorm::table));
}

void launchLossScale(const Launch& l) {
  using U = LossScaleUpdate;
  const size_t grads = l.node.inputs.size() - U::kInputs;
  std::vector<ops::TensorView> views;
  for (size_t i = 0; i < grads; ++i) views.push_back(l.view(l.node.inputs[i]));
  auto fixed = [&](U::In slot) { return l.view(l.node.inputs[grads + slot]); };
  const U::Attrs& at = l.attr<U::Attrs>();
  ops::gradNorm(l.rec, views, fixed(U::scratch), fixed(U::norm),
                std::numeric_limits<float>::infinity(), l.out(U::table));
  ops::updateLossScale(l.rec, fixed(U::norm), fixed(U::scale), fixed(U::counters), fixed(U::state),
                       at.max_norm, at.options);
}

void launchSgd(const Launch& l) {
  using U = SgdUpdate;
  ops::sgd(l.rec, l.in(U::param), l.in(U::grad), l.in(U::velocity), l.in(U::state),
           l.attr<U::Attrs>());
}

void launchAdamW(const Launch& l) {
  using U = AdamWUpdate;
  const U::Attrs& attrs = l.attr<U::Attrs>();
  std::vector<ops::AdamWTensor> tensors(attrs.weight_decay.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    auto each = [&](U::Each slot) { return l.in(int(U::kEach * i) + slot); };
    tensors[i] = {each(U::param), each(U::grad), each(U::m), each(U::v), attrs.weight_decay[i]};
  }
  ops::adamwMany(l.rec, tensors, l.in(int(U::kEach * tensors.size()) + U::state), l.out(U::table),
                 attrs.options);
}

}  // namespace

namespace defs {
const OpDef kAdvanceStep{.name = "advanceStep",
                         .inputs = AdvanceStep::kInputs,
                         .outputs = AdvanceStep::kOutputs,
                         .side_effects = true,
                         .launch = launchAdvance};
const OpDef kClipGradNorm{.name = "clipGradNorm",
                          .inputs = ClipGradNorm::kInputs,
                          .outputs = ClipGradNorm::kOutputs,
                          .variadic = true,
                          .side_effects = true,
                          .launch = launchClip};
const OpDef kLossScaleUpdate{.name = "lossScale",
                             .inputs = LossScaleUpdate::kInputs,
                             .outputs = LossScaleUpdate::kOutputs,
                             .variadic = true,
                             .side_effects = true,
                             .launch = launchLossScale};
const OpDef kSgdUpdate{.name = "sgd",
                       .inputs = SgdUpdate::kInputs,
                       .outputs = SgdUpdate::kOutputs,
                       .side_effects = true,
                       .launch = launchSgd};
const OpDef kAdamWUpdate{.name = "adamw",
                         .inputs = AdamWUpdate::kInputs,
                         .outputs = AdamWUpdate::kOutputs,
                         .variadic = true,
                         .side_effects = true,
                         .launch = launchAdamW};
}  // namespace defs

}  // namespace vkgrad::graph
