// Low-rank adapters (LoRA, Hu et al. 2021) on a model's linear products. An adapter on the
// product y = x·W + b, W (in, out), adds
//   y += (alpha / r) · (x·A)·B        A (in, r), B (r, out)
// while W and b stay frozen; only A and B train. A starts as PEFT's nn.Linear(in, r) does
// (kaiming_uniform_ with a = sqrt(5) on its (r, in) weight: gain sqrt(2 / (1 + 5)), bound
// gain · sqrt(3 / fan_in) = 1/sqrt(in), so U(-1/sqrt(in), 1/sqrt(in))) and B at zero, so a new
// adapter leaves the model's outputs exactly as they were.
//
// The adapter lives in the ParameterStore beside its product, under the product's prefix P
// (nn/layers.h: P.w, P.b):
//   P.lora_a (in, r), P.lora_b (r, out)   trained
//   P.lora_scale (1)                      alpha / r, frozen: it travels with the store, so a
//                                         model's linear helper finds the whole adapter by
//                                         name and no LoRA setting is passed down its blocks
// nn::linear adds any adapter it finds (addLora); another model's own product helper calls
// addLora after its product and is adapted the same way.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vkgrad/io/safetensors.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::nn {

struct LoraConfig {
  int64_t rank = 8;  // r
  // PEFT's LoraConfig default (lora_alpha = 8, whatever r is): the scale is alpha / r.
  float alpha = 8.0f;
  float scale() const { return alpha / float(rank); }
};

// The names of the adapter of the product at prefix.
std::string loraA(const std::string& prefix);      // prefix.lora_a
std::string loraB(const std::string& prefix);      // prefix.lora_b
std::string loraScale(const std::string& prefix);  // prefix.lora_scale

// Declares the adapter of the product at prefix, whose weight prefix.w (in, out) the store
// holds: A with PEFT's uniform init, B zeros, the scale a frozen constant. Throws Error naming
// the product for a rank outside [1, min(in, out)], an alpha that is not finite and positive,
// a missing or non-matrix prefix.w, or an adapter already declared there.
void declareLora(graph::ParameterStore& store, const std::string& prefix, const LoraConfig& config);
// True when the store holds an adapter at prefix.
bool hasLora(const graph::ParameterStore& store, const std::string& prefix);
// The prefixes of every adapter in the store, in the order declared.
std::vector<std::string> loraPrefixes(const graph::ParameterStore& store);

// x: (..., in), y: (..., out), the product's output (x·W + b, a residual added or not) ->
// y + scale · (x·A)·B where the store holds an adapter at prefix (the add joins B's product:
// Graph::matmulAdd), else y itself. ShapeError naming the product when x or y do not fit.
graph::Tensor addLora(graph::Graph& g, const graph::ParameterStore& store,
                      const std::string& prefix, graph::Tensor x, graph::Tensor y);

// The starting values of every adapter in the store (the store's declaration order), drawn
// on the host so that they can join an upload of a pretrained model's weights
// (ParameterStore::upload takes every parameter at once): A from U(-1/sqrt(in), 1/sqrt(in))
// from one std::mt19937_64 stream seeded with `seed`, in declaration order (24-bit uniforms:
// the same bits on every platform), B zeros, the scale.
std::vector<graph::SavedTensor> loraInitialValues(const graph::ParameterStore& store,
                                                  uint64_t seed);

// Folds every adapter into its product: W += scale · A·B (in f64, stored f32), and drops the
// adapter's tensors. parameters: a store's download() (any formats). Throws Error naming an
// adapter whose weight is missing or mis-shaped.
std::vector<graph::SavedTensor> mergeLora(const std::vector<graph::SavedTensor>& parameters);

}  // namespace vkgrad::nn
