// The precision policy: which format a compiled graph stores its float tensors in. It is a
// property of the graph, not of a model: any graph, built in f32, can be stored in bf16 or
// f16 by one call after autograd and the optimizer have added their nodes.
//
// What a 16-bit policy changes, and why:
//   - activations (every node's output) and the gradients of activations: 16-bit. They are
//     most of a step's bytes (the arena: planner.h), and every kernel reads them into f32,
//     computes and accumulates in f32, and rounds once as it stores (ops/storage.h).
//   - outputs an op keeps in f32 (OpDef::f32_outputs): losses, per-row losses, the
//     statistics a backward pass reads (layer norm's mean and 1/std, attention's log-sum-exp
//     and row dots), partial sums: their error would be amplified, and they are small.
//   - parameters (the f32 masters), their gradients, the optimizer's moments and every other
//     State, Constant, Input and Dataset tensor: f32, untouched. The optimizer updates f32
//     masters from f32 gradients; a kernel that reads a parameter widens nothing.
//   - except a frozen parameter its store keeps in 16 bits (ParameterStore::setStorage): the
//     store's choice, not the policy's, since every graph that reads it binds the same bytes.
//     Its tensor takes the stored format under every policy, fp32 included; kernels read it
//     into f32 as they read a 16-bit activation.
//   - views (reshape, slice) take their root's format.
#pragma once

#include <string>
#include <string_view>

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

enum class Precision { F32, BF16, F16 };

const char* precisionName(Precision precision);  // "fp32", "bf16", "fp16"
// "fp32" | "f32" | "bf16" | "fp16" | "f16"; throws Error listing them otherwise.
Precision parsePrecision(std::string_view text);
// The format activations take under the policy.
DType activationDtype(Precision precision);

struct PrecisionSummary {
  int sixteen_bit = 0;        // tensors stored in 16 bits
  int kept_f32 = 0;           // activations and gradients an op keeps in f32
  int stored_parameters = 0;  // parameter tensors given their store's 16-bit format
};

// Stores g's activations and activation gradients in the policy's format (see above), and its
// parameters in their stores' formats. Call it once, after the last node is added and before
// an Executor compiles g (which refuses a parameter read in another format than it is
// stored in). F32 changes nothing else. Throws Error for a 16-bit parameter that g trains
// (a graph that took it before it was frozen).
PrecisionSummary applyPrecision(Graph& g, Precision precision);

}  // namespace vkgrad::graph
