#include "vkgrad/nn/transformer.h"

#include "vkgrad/core/error.h"

namespace vkgrad::nn {

void declareMlp(ParameterStore& store, const std::string& prefix, int64_t width, int64_t hidden,
                const BlockInit& init) {
  declareLinear(store, prefix + ".fc", width, hidden, init.weight);
  declareLinear(store, prefix + ".proj", hidden, width, init.residual);
}

Tensor mlp(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
           ActivationSpec activation, Tensor residual) {
  // The activation applied in fc's own node, as its product is stored (Graph::matmulActivation).
  const Tensor h = linear(g, store, prefix + ".fc", x, activation.kind, activation.param);
  return linear(g, store, prefix + ".proj", h, residual);
}

void declareAttention(ParameterStore& store, const std::string& prefix, int64_t width,
                      const BlockInit& init) {
  declareLinear(store, prefix + ".qkv", width, 3 * width, init.weight);
  declareLinear(store, prefix + ".proj", width, width, init.residual);
}

Tensor attention(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
                 int64_t heads, bool causal, Tensor residual, const KvCache* cache) {
  const ops::Shape s = g.shape(x);
  if (s.rank() != 3 || heads <= 0 || s[2] % heads != 0)
    throw ShapeError(g.describe("nn::attention", {x}) + ": x must be (B,T,width) with width a " +
                     "multiple of heads " + std::to_string(heads));
  if (cache && !causal)
    throw ShapeError(g.describe("nn::attention", {x}) +
                     ": a key/value cache needs causal attention");
  const Tensor qkv = linear(g, store, prefix + ".qkv", x);  // (B,T,3*width)
  const Tensor o = cache
                       ? g.cachedAttention(qkv, heads, cache->keys, cache->values, cache->position)
                       : g.attention(qkv, heads, causal);
  return linear(g, store, prefix + ".proj", o, residual);
}

const char* normName(Norm norm) {
  return norm == Norm::Pre ? "pre" : "post";
}

std::string blockName(int64_t i) {
  return "h" + std::to_string(i);
}

Norm normFromName(const std::string& name) {
  for (Norm n : {Norm::Pre, Norm::Post})
    if (name == normName(n)) return n;
  throw Error("unknown norm \"" + name + "\" (pre or post)");
}

ops::Activation mlpActivationFromName(const std::string& name) {
  for (ops::Activation a : {ops::Activation::GeluTanh, ops::Activation::GeluErf,
                            ops::Activation::LeakyRelu, ops::Activation::Relu})
    if (name == ops::activationName(a)) return a;
  throw Error("unknown activation \"" + name + "\"");
}

void declareBlock(ParameterStore& store, const std::string& prefix, const BlockConfig& config,
                  const BlockInit& init) {
  declareLayerNorm(store, prefix + ".ln1", config.width);
  declareAttention(store, prefix + ".attn", config.width, init);
  declareLayerNorm(store, prefix + ".ln2", config.width);
  declareMlp(store, prefix + ".mlp", config.width, config.mlpHidden(), init);
}

Tensor block(Graph& g, const ParameterStore& store, const std::string& prefix,
             const BlockConfig& config, Tensor x, const KvCache* cache) {
  // residual + branch(t). Where dropout is the identity (p = 0, or an evaluation graph) the
  // add joins the branch's output projection (Graph::matmulAdd): no add pass of its own.
  const bool merge_residual = config.dropout == 0.0f || !g.training();
  auto attn = [&](Tensor t, Tensor residual) {
    const std::string p = prefix + ".attn";
    if (merge_residual)
      return attention(g, store, p, t, config.heads, config.causal, residual, cache);
    return g.add(residual,
                 g.dropout(attention(g, store, p, t, config.heads, config.causal, {}, cache),
                           config.dropout));
  };
  auto ff = [&](Tensor t, Tensor residual) {
    const std::string p = prefix + ".mlp";
    if (merge_residual) return mlp(g, store, p, t, config.activation, residual);
    return g.add(residual, g.dropout(mlp(g, store, p, t, config.activation), config.dropout));
  };
  auto norm = [&](const char* name, Tensor t) {
    return layerNorm(g, store, prefix + name, t, config.norm_eps);
  };
  if (config.norm == Norm::Pre) {
    x = attn(norm(".ln1", x), x);
    return ff(norm(".ln2", x), x);
  }
  x = norm(".ln1", attn(x, x));
  return norm(".ln2", ff(x, x));
}

}  // namespace vkgrad::nn
