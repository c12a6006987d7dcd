// The transformer blocks: MLP, multi-head self-attention and the residual block around them,
// with the same declare/graph split as nn/layers.h. Names under a block prefix P:
// P.ln1, P.attn.qkv, P.attn.proj, P.ln2, P.mlp.fc, P.mlp.proj.
//
// Dropout (BlockConfig::dropout) follows GPT-2: on the attention and MLP outputs before
// they join the residual stream; evaluation graphs drop nothing (Graph::dropout).
#pragma once

#include <cstdint>
#include <string>

#include "vkgrad/nn/layers.h"
#include "vkgrad/ops/activation.h"

namespace vkgrad::nn {

// The MLP's nonlinearity: LeakyReLU (param: negative slope) or GELU (GeluTanh, GeluErf);
// any ops::Activation is accepted.
struct ActivationSpec {
  ops::Activation kind = ops::Activation::GeluTanh;
  float param = 0.0f;
  static ActivationSpec gelu() { return {ops::Activation::GeluTanh}; }
  static ActivationSpec leakyRelu(float slope = 0.01f) {
    return {ops::Activation::LeakyRelu, slope};
  }
};

// How parameters start: Linear weights draw from `weight`, except the projections that
// write into the residual stream (attn.proj, mlp.proj), which draw from `residual`.
struct BlockInit {
  Init weight = Init::xavierUniform();
  Init residual = Init::xavierUniform();
};

// x·fc -> activation -> ·proj: width -> hidden -> width.
void declareMlp(ParameterStore& store, const std::string& prefix, int64_t width, int64_t hidden,
                const BlockInit& init = {});
// x: (..., width) -> (..., width); with a residual, residual + mlp(x) in its last node.
Tensor mlp(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
           ActivationSpec activation = {}, Tensor residual = {});

// One fused QKV projection width -> 3*width, attention over `heads` heads of width/heads,
// output projection width -> width.
void declareAttention(ParameterStore& store, const std::string& prefix, int64_t width,
                      const BlockInit& init = {});
// A layer's keys and values of earlier positions, for decoding a few rows at a time
// (Graph::cachedAttention): Input tensors (B, rows, width) that persist between steps, and a
// (1) u32 input, the sequence position of the step's first row.
struct KvCache {
  Tensor keys, values, position;
};

// x: (B,T,width) -> (B,T,width); q, k and v are read in place from the fused projection.
// Throws ShapeError when width is not a multiple of heads. With a residual, residual +
// attention(x) in its last node. With a cache (causal only), x holds the T newest rows of a
// sequence, whose keys and values join the cache, and each attends over the cached rows up
// to its own.
Tensor attention(Graph& g, const ParameterStore& store, const std::string& prefix, Tensor x,
                 int64_t heads, bool causal, Tensor residual = {}, const KvCache* cache = nullptr);

enum class Norm {
  Post,  // x = norm1(attn(x) + x); x = norm2(mlp(x) + x)   (the original transformer)
  Pre,   // x = x + attn(norm1(x)); x = x + mlp(norm2(x))   (GPT-2; needs a final norm)
};
const char* normName(Norm norm);
// "pre" or "post" (normName's); throws Error for anything else.
Norm normFromName(const std::string& name);
// An MLP activation by ops::activationName: gelu_tanh, gelu_erf, leaky_relu or relu (what a
// checkpoint may name); throws Error for anything else.
ops::Activation mlpActivationFromName(const std::string& name);

struct BlockConfig {
  int64_t width = 0, heads = 1, hidden = 0;  // hidden 0: 4 * width
  Norm norm = Norm::Pre;
  ActivationSpec activation;
  bool causal = true;
  float dropout = 0.0f;    // on the attention and MLP outputs
  float norm_eps = 1e-5f;  // the LayerNorms' epsilon (an imported model's own)
  int64_t mlpHidden() const { return hidden > 0 ? hidden : 4 * width; }
};

// The name prefix of a model's i-th block: "h<i>" (the GPT's and the ViT's).
std::string blockName(int64_t i);

void declareBlock(ParameterStore& store, const std::string& prefix, const BlockConfig& config,
                  const BlockInit& init = {});
// x: (B,T,width) -> (B,T,width). With a cache (a causal block), x is the T newest rows of a
// sequence and the attention reads the earlier ones from the cache (see attention()).
Tensor block(Graph& g, const ParameterStore& store, const std::string& prefix,
             const BlockConfig& config, Tensor x, const KvCache* cache = nullptr);

}  // namespace vkgrad::nn
