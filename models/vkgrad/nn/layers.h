// The basic nn blocks: Linear, LayerNorm, RMSNorm and the token + learned positional embedding.
//
// Each block is two functions: declare*() adds its parameters to a ParameterStore under a
// name prefix (once, before the store is initialised), and the graph function adds its nodes
// to a Graph, fetching the parameters by name. The split exists because a Trainer's LossFn
// runs more than once (training and evaluation graphs) and must not add parameters.
// Names: "<prefix>.w" / "<prefix>.b" for Linear, "<prefix>.g" / "<prefix>.b" for LayerNorm,
// "<prefix>.tok" / "<prefix>.pos" for the embedding.
#pragma once

#include <cstdint>
#include <string>

#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::nn {

using graph::Graph;
using graph::Init;
using graph::ParameterStore;
using graph::Tensor;

// y = x·W (+ b): W (in, out), b (out) unless bias is false.
void declareLinear(ParameterStore& store, const std::string& prefix, int64_t in, int64_t out,
                   Init weight = Init::xavierUniform(), bool bias = true);
// x: (..., in) -> (..., out). Uses the bias when the store has one. With a residual (shaped
// like the output), x·W + b + residual as one node (Graph::matmulAdd). Both forms add the
// low-rank adapter the store holds at prefix, if any (nn/lora.h).
Tensor linear(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
              Tensor residual = {});
// kind(x·W + b) as one node (Graph::matmulActivation: the activation applied as the product
// is stored).
Tensor linear(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
              ops::Activation kind, float param = 0.0f);

// gamma 1, beta 0 over the last dim.
void declareLayerNorm(ParameterStore& store, const std::string& prefix, int64_t dim);
// x: (..., dim) -> (..., dim).
Tensor layerNorm(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
                 float eps = 1e-5f);

// RMSNorm's gain, 1, over the last dim ("<prefix>.g"; no bias).
void declareRmsNorm(ParameterStore& store, const std::string& prefix, int64_t dim);
// x: (..., dim) -> (..., dim): x / sqrt(mean(x^2) + eps) * g (Graph::rmsNorm).
Tensor rmsNorm(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
               float eps = 1e-6f);

// Token table (vocab, width) and positions (context, width).
void declareEmbedding(ParameterStore& store, const std::string& prefix, int64_t vocab,
                      int64_t context, int64_t width, Init tokens = Init::normal(0.0f, 0.02f),
                      Init positions = Init::normal(0.0f, 0.02f));
// ids: (B,T) u32 with T <= context -> (B,T,width): tok[ids] + pos[0..T). Throws ShapeError
// for a window longer than the position table. A graph may hold each parameter once, so
// `table`, when given, receives the token table's tensor for reuse (a tied output head).
// With positions, a (T) u32 tensor, row t adds pos[positions[t]] instead of pos[t]: the rows
// of a decoding step, somewhere in their sequence.
Tensor embedding(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor ids,
                 Tensor* table = nullptr, Tensor positions = {});

}  // namespace vkgrad::nn
