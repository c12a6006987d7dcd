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
//
// Column blocks. A fused product (a Llama's q, k and v in one (C, (H+2Hkv)D) weight, gate and
// up in one (C, 2F)) stands for several layers of the original model, each of which an adapter
// may target alone. A block adapter covers the columns [c, c + out_c) of the product:
//   P.lora_a.<c> (in, r), P.lora_b.<c> (r, out_c)   y[..., c : c + out_c] += s·(x·A_c)·B_c
// and P.lora_scale is shared by the product's blocks (one adapter set, one alpha / r). A
// product carries either one whole adapter or any set of disjoint blocks; the columns no block
// covers are left as the product made them. Every function below takes both forms.
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

// A block's first column; kWholeProduct: the adapter of the whole product.
inline constexpr int64_t kWholeProduct = -1;

// The names of the adapter (or the block at column `block`) of the product at prefix.
std::string loraA(const std::string& prefix, int64_t block = kWholeProduct);  // prefix.lora_a[.c]
std::string loraB(const std::string& prefix, int64_t block = kWholeProduct);  // prefix.lora_b[.c]
std::string loraScale(const std::string& prefix);                             // prefix.lora_scale
// True for the name of an adapter's tensor (A, B or scale, whole or block).
bool isLoraName(const std::string& name);

// Declares the adapter of the product at prefix, whose weight prefix.w (in, out) the store
// holds: A with PEFT's uniform init, B zeros, the scale a frozen constant (declared with the
// product's first adapter). With columns [begin, end) the adapter covers that block of the
// product's columns alone (P.lora_a.<begin>, P.lora_b.<begin>). Throws Error naming the
// product for a rank outside [1, min(in, block width)], an alpha that is not finite and
// positive, a missing or non-matrix prefix.w, a block outside [0, out] or empty, an adapter
// that overlaps one already declared there, or an alpha / r unlike the product's other blocks'.
void declareLora(graph::ParameterStore& store, const std::string& prefix, const LoraConfig& config,
                 int64_t begin = kWholeProduct, int64_t end = kWholeProduct);
// True when the store holds an adapter (whole or blocks) at prefix.
bool hasLora(const graph::ParameterStore& store, const std::string& prefix);
// The prefixes of every adapted product in the store, in the order declared.
std::vector<std::string> loraPrefixes(const graph::ParameterStore& store);

// One adapter of a product: its columns [begin, end) and its tensors' names.
struct LoraBlock {
  int64_t begin = 0, end = 0;
  std::string a, b;
};
// The adapters of the product at prefix, by first column (one block of every column for a
// whole adapter; none where there is no adapter).
std::vector<LoraBlock> loraBlocks(const graph::ParameterStore& store, const std::string& prefix);

// x: (..., in), y: (..., out), the product's output (x·W + b, a residual added or not) ->
// y + scale · (x·A)·B where the store holds an adapter at prefix (the add joins B's product:
// Graph::matmulAdd), else y itself. Blocks: y cut along its last axis at the blocks' edges
// (Graph::split), each block's delta added onto its piece, the pieces joined again
// (Graph::concat): copies of y, exact, and no zeros for the columns no block covers.
// ShapeError naming the product when x or y do not fit.
graph::Tensor addLora(graph::Graph& g, const graph::ParameterStore& store,
                      const std::string& prefix, graph::Tensor x, graph::Tensor y);

// The starting values of every adapter in the store (the store's declaration order), drawn
// on the host so that they can join an upload of a pretrained model's weights
// (ParameterStore::upload takes every parameter at once): A from U(-1/sqrt(in), 1/sqrt(in))
// from one std::mt19937_64 stream seeded with `seed`, in declaration order (24-bit uniforms:
// the same bits on every platform), B zeros, the scale.
std::vector<graph::SavedTensor> loraInitialValues(const graph::ParameterStore& store,
                                                  uint64_t seed);

// Folds every adapter into its product: W += scale · A·B (in f64, stored f32; a block into its
// columns of W), and drops the adapter's tensors. parameters: a store's download() (any formats).
// Throws Error naming an adapter whose weight is missing or mis-shaped.
std::vector<graph::SavedTensor> mergeLora(const std::vector<graph::SavedTensor>& parameters);

}  // namespace vkgrad::nn
