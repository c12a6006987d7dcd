// A CPU reference for models/gpt: one training step (forward, backward, AdamW) of the same
// model, built from the reference ops (engine/vkgrad/ops/reference), which read and write float
// arrays and accumulate in double. The glue between them (residual adds, gradient sums,
// the position rows) is done in double and rounded once, so every activation and gradient
// is within an fp32 rounding or two of the exact value: the trusted side of a device test.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/gpt/gpt.h"
#include "vkgrad/ops/tensor.h"
#include "vkgrad/training/optimizer.h"

namespace vkgrad::test {

// Parameter values or gradients by declareGpt's names, each row-major in its shape.
using NamedArrays = std::map<std::string, std::vector<float>>;

// The names and shapes declareGpt(store, config) adds: checks the layout the reference assumes.
std::map<std::string, ops::Shape> gptReferenceShapes(const gpt::GptConfig& config);

struct GptReferenceStep {
  double loss = 0;    // mean cross-entropy over all batch * t rows
  NamedArrays grads;  // d loss / d parameter, for every parameter
};

// params: every parameter of gptReferenceShapes(config); ids, targets: (batch, t) u32,
// t <= config.context. Dropout must be 0.
GptReferenceStep gptReference(const gpt::GptConfig& config, const NamedArrays& params,
                              std::span<const uint32_t> ids, std::span<const uint32_t> targets,
                              int64_t batch, int64_t t);

// The first AdamW step from zero moments, as graph::addOptimizer applies it: weight decay only
// on parameters of rank > 1 unless config.decay_vectors; no clipping (max_grad_norm must be 0).
// In double (ops/reference/optimizer.h).
std::map<std::string, std::vector<double>> adamwReference(
    const std::map<std::string, ops::Shape>& shapes, const NamedArrays& params,
    const NamedArrays& grads, const graph::OptimizerConfig& config);

}  // namespace vkgrad::test
