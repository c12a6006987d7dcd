// Turns an ONNX model into a vkgrad graph: every node becomes the graph ops it means
// (runtime/graph.h), shapes are inferred on the host for the given input shapes, and what
// is known on the host (shape arithmetic: Shape, Gather, Concat, Range, Cast, Equal, Where,
// ...) is folded there, so the device graph holds only the tensor work. Float initializers
// read on the device become named parameters of a ParameterStore (trainable unless frozen).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "vkgrad/onnx/model.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {
class ParameterStore;
}

namespace vkgrad::onnx {

struct ImportOptions {
  // Dims of inputs whose axes the file leaves open (a named "batch" axis, say), by input
  // name: the whole shape. Fixed axes must agree.
  std::map<std::string, std::vector<int64_t>> input_dims;
  // Device tensors that stand for some inputs (a Trainer's batch) instead of Graph::input.
  // Their shapes must be the inputs' (a scalar as (1)); integer inputs are u32 ids.
  std::map<std::string, graph::Tensor> provided;
  // Inputs whose values are known when importing (a shape, axes, a fixed mask): they become
  // host constants, folded like initializers, and take no device input.
  std::map<std::string, HostTensor> known_inputs;
  // Marks the outputs (Graph::markOutput) so they can be read after a step; off when a loss
  // reads them inside a training graph (a Trainer takes marked tensors for metrics).
  bool mark_outputs = true;
  // Replaces the patterns onnx/fusions.h finds (GELU written out) by their one op; off: every
  // node as written (the same results within rounding, more dispatches).
  bool fuse = true;
};

struct Port {
  std::string name;
  graph::Tensor tensor;
  std::vector<int64_t> dims;  // ONNX's (a scalar: empty; the tensor then has shape (1))
  int type = kFloat;          // ONNX's element type; integer tensors are u32 on the device
  // Inputs: read by the graph (an input nothing reads takes no values; a known input is never
  // on the device). Outputs: always true.
  bool used = true;
};

struct Imported {
  std::vector<Port> inputs;   // the model's inputs, in order
  std::vector<Port> outputs;  // the model's outputs, in order (float ones marked as outputs)
  std::vector<std::string> parameters;  // the initializers read on the device, in order
  std::vector<std::string> fusions;     // one line per pattern fused, for `vkgrad-onnx info`
};

// The device shape of ONNX dims: a scalar is (1).
graph::Shape deviceShape(const std::vector<int64_t>& dims);

// The ops importGraph knows, sorted.
std::vector<std::string> supportedOps();
// "Foo (node \"x\")" for every node whose op the importer does not know; empty: none.
std::vector<std::string> unsupportedNodes(const Model& model);

// The float initializers the graph reads on the device at these input shapes: what a store
// must hold before importGraph. A dry import (no device work).
std::vector<std::string> deviceInitializers(const Model& model, const ImportOptions& options);
// Adds those initializers to store as parameters (their shapes; a scalar as (1)) and
// uploads their values.
void addParameters(graph::ParameterStore& store, const Model& model,
                   const std::vector<std::string>& names);

// Adds the model's computation to g. Parameters come from store (addParameters first).
// Throws Error naming the node (op type and name) for an unsupported op or attribute, a
// value that must be known on the host and is not, or shapes that do not fit (the graph's
// ShapeError with the node named); nothing useful is left in g then.
Imported importGraph(graph::Graph& g, const Model& model, const graph::ParameterStore& store,
                     const ImportOptions& options = {});

}  // namespace vkgrad::onnx
