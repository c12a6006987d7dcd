#include "vkgrad/nn/layers.h"

#include <utility>

#include "vkgrad/core/error.h"
#include "vkgrad/nn/lora.h"

namespace vkgrad::nn {

void declareLinear(ParameterStore& store, const std::string& prefix, int64_t in, int64_t out,
                   Init weight, bool bias) {
  store.add(prefix + ".w", {in, out}, weight);
  if (bias) store.add(prefix + ".b", {out}, Init::zeros());
}

namespace {
// W and b (absent where the store has none) of the linear layer at prefix.
std::pair<Tensor, Tensor> linearParameters(Graph& g, const ParameterStore& store,
                                           const std::string& prefix) {
  const graph::Parameter* b = store.find(prefix + ".b");
  return {g.parameter(store.at(prefix + ".w")), b ? g.parameter(*b) : Tensor{}};
}
}  // namespace

Tensor linear(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
              Tensor residual) {
  const auto [w, bias] = linearParameters(g, store, prefix);
  return addLora(g, store, prefix, x,
                 residual ? g.matmulAdd(x, w, bias, residual) : g.matmul(x, w, bias));
}

Tensor linear(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
              ops::Activation kind, float param) {
  const auto [w, bias] = linearParameters(g, store, prefix);
  // An adapter joins the product before the activation, which then takes a node of its own.
  if (hasLora(store, prefix))
    return g.activation(addLora(g, store, prefix, x, g.matmul(x, w, bias)), kind, param);
  return g.matmulActivation(x, w, bias, kind, param);
}

void declareLayerNorm(ParameterStore& store, const std::string& prefix, int64_t dim) {
  store.add(prefix + ".g", {dim}, Init::ones());
  store.add(prefix + ".b", {dim}, Init::zeros());
}

Tensor layerNorm(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
                 float eps) {
  return g.layerNorm(x, g.parameter(store.at(prefix + ".g")), g.parameter(store.at(prefix + ".b")),
                     eps);
}

void declareRmsNorm(ParameterStore& store, const std::string& prefix, int64_t dim) {
  store.add(prefix + ".g", {dim}, Init::ones());
}

Tensor rmsNorm(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
               float eps) {
  return g.rmsNorm(x, g.parameter(store.at(prefix + ".g")), eps);
}

void declareEmbedding(ParameterStore& store, const std::string& prefix, int64_t vocab,
                      int64_t context, int64_t width, Init tokens, Init positions) {
  store.add(prefix + ".tok", {vocab, width}, tokens);
  store.add(prefix + ".pos", {context, width}, positions);
}

Tensor embedding(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor ids,
                 Tensor* table, Tensor positions) {
  const graph::Parameter& pos = store.at(prefix + ".pos");
  const ops::Shape s = g.shape(ids);
  if (s.rank() != 2 || s[1] > pos.shape[0])
    throw ShapeError(g.describe("embedding", {ids}) + ": ids must be (B,T) with T <= context " +
                     std::to_string(pos.shape[0]));
  Tensor p = g.parameter(pos);
  if (positions) {
    if (!(g.shape(positions) == ops::Shape{s[1]}))
      throw ShapeError(g.describe("embedding", {ids, positions}) + ": positions must be (T)");
    p = g.gather(p, positions);
  } else if (s[1] < pos.shape[0]) {
    p = g.slice(p, 0, s[1]);  // a shorter window uses the first rows
  }
  const Tensor tok = g.parameter(store.at(prefix + ".tok"));
  if (table) *table = tok;
  return g.add(g.gather(tok, ids), p);
}

}  // namespace vkgrad::nn
