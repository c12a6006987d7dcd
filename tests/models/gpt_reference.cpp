#include "models/gpt_reference.h"

#include "vkgrad/core/error.h"
#include "vkgrad/ops/cross_entropy.h"
#include "vkgrad/ops/reference/activation.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/ops/reference/cross_entropy.h"
#include "vkgrad/ops/reference/gather.h"
#include "vkgrad/ops/reference/layer_norm.h"
#include "vkgrad/ops/reference/matmul.h"
#include "vkgrad/ops/reference/optimizer.h"

namespace vkgrad::test {
namespace {

using Vec = std::vector<float>;

// Residual glue in double: for one add this rounds exactly as an fp32 add does, and for a
// gradient that sums two branches it is the sum the autograd's accumulation approximates.
Vec add(const Vec& a, const Vec& b) {
  Vec out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = float(double(a[i]) + double(b[i]));
  return out;
}

// The parameters, their gradients and the step's sizes, shared by every layer below.
struct Model {
  const gpt::GptConfig& c;
  const NamedArrays& params;
  NamedArrays& grads;
  int64_t batch, t;
  int64_t rows() const { return batch * t; }

  const float* p(const std::string& name) const {
    auto it = params.find(name);
    if (it == params.end()) throw Error("gptReference: no parameter " + name);
    return it->second.data();
  }
  bool has(const std::string& name) const { return params.count(name) != 0; }
  float* g(const std::string& name) { return grads.at(name).data(); }
};

// ---- Linear: x (rows, in) -> y (rows, out) = x·W (+ b), W (in, out).

ops::ref::MatmulArgs linearArgs(const Model& m, const std::string& prefix, int64_t in) {
  ops::ref::MatmulArgs a;
  a.m = m.rows();
  a.k = in;
  a.n = int64_t(m.params.at(prefix + ".w").size()) / in;
  return a;
}

Vec linearForward(const Model& m, const std::string& prefix, const Vec& x) {
  const int64_t in = int64_t(x.size()) / m.rows();
  const ops::ref::MatmulArgs a = linearArgs(m, prefix, in);
  Vec y(size_t(a.m * a.n));
  const float* bias = m.has(prefix + ".b") ? m.p(prefix + ".b") : nullptr;
  ops::ref::matmul(x.data(), m.p(prefix + ".w"), bias, y.data(), a);
  return y;
}

// dy: (rows, out) -> dx (rows, in); writes the gradients of W and b.
Vec linearBackward(Model& m, const std::string& prefix, const Vec& x, const Vec& dy) {
  const int64_t in = int64_t(x.size()) / m.rows();
  const ops::ref::MatmulArgs a = linearArgs(m, prefix, in);
  Vec dx(x.size());
  float* dbias = m.has(prefix + ".b") ? m.g(prefix + ".b") : nullptr;
  ops::ref::matmulBackward(x.data(), m.p(prefix + ".w"), dy.data(), dx.data(), m.g(prefix + ".w"),
                           dbias, a);
  return dx;
}

// ---- LayerNorm over the width, eps 1e-5 as nn::layerNorm.

constexpr float kLayerNormEps = 1e-5f;

Vec layerNormForward(const Model& m, const std::string& prefix, const Vec& x) {
  const int64_t n = m.c.width;
  Vec y(x.size()), mean(size_t(m.rows())), rstd(size_t(m.rows()));
  ops::ref::layerNorm(x.data(), m.p(prefix + ".g"), m.p(prefix + ".b"), y.data(), mean.data(),
                      rstd.data(), m.rows(), n, kLayerNormEps);
  return y;
}

// Statistics recomputed from x in double (null mean, rstd), not the fp32 saved ones.
Vec layerNormBackward(Model& m, const std::string& prefix, const Vec& x, const Vec& dy) {
  Vec dx(x.size());
  ops::ref::layerNormBackward(x.data(), m.p(prefix + ".g"), nullptr, nullptr, dy.data(), dx.data(),
                              m.g(prefix + ".g"), m.g(prefix + ".b"), m.rows(), m.c.width,
                              kLayerNormEps);
  return dx;
}

// ---- Causal attention on the fused projection: each row of qkv (rows, 3C) is q, k, v side
// by side, heads within each (Graph::attention(qkv, heads)); o (rows, C) is packed.

ops::ref::AttentionShape attentionShape(const Model& m) {
  ops::ref::AttentionShape s;
  s.b = m.batch;
  s.h = m.c.heads;
  s.tq = s.tk = m.t;
  s.d = m.c.width / m.c.heads;
  s.causal = true;
  s.scale = 0;  // 1/sqrt(D), as the graph's default
  s.q_stride = s.k_stride = s.v_stride = 3 * m.c.width;
  s.o_stride = m.c.width;
  return s;
}

Vec attentionForward(const Model& m, const Vec& qkv) {
  const int64_t c = m.c.width;
  Vec o(size_t(m.rows() * c)), lse(size_t(m.batch * m.c.heads * m.t));
  ops::ref::attention(attentionShape(m), qkv.data(), qkv.data() + c, qkv.data() + 2 * c, o.data(),
                      lse.data());
  return o;
}

// dout: (rows, C) -> dqkv (rows, 3C), the three gradients written into their column blocks.
Vec attentionBackward(const Model& m, const Vec& qkv, const Vec& dout) {
  const int64_t c = m.c.width;
  Vec dqkv(qkv.size());
  ops::ref::attentionBackward(attentionShape(m), qkv.data(), qkv.data() + c, qkv.data() + 2 * c,
                              dout.data(), dqkv.data(), dqkv.data() + c, dqkv.data() + 2 * c);
  return dqkv;
}

// ---- The attention sublayer: in ·qkv -> attention -> ·proj.

struct AttnSaved {
  Vec in, qkv, o;
};

Vec attnForward(const Model& m, const std::string& prefix, const Vec& in, AttnSaved& s) {
  s.in = in;
  s.qkv = linearForward(m, prefix + ".qkv", in);
  s.o = attentionForward(m, s.qkv);
  return linearForward(m, prefix + ".proj", s.o);
}

Vec attnBackward(Model& m, const std::string& prefix, const AttnSaved& s, const Vec& dy) {
  const Vec dout = linearBackward(m, prefix + ".proj", s.o, dy);
  const Vec dqkv = attentionBackward(m, s.qkv, dout);
  return linearBackward(m, prefix + ".qkv", s.in, dqkv);
}

// ---- The MLP sublayer: in ·fc -> activation -> ·proj.

struct MlpSaved {
  Vec in, fc, act;
};

Vec mlpForward(const Model& m, const std::string& prefix, const Vec& in, MlpSaved& s) {
  s.in = in;
  s.fc = linearForward(m, prefix + ".fc", in);
  s.act.resize(s.fc.size());
  ops::ref::activation(m.c.activation.kind, s.fc.data(), s.act.data(), int64_t(s.fc.size()),
                       m.c.activation.param);
  return linearForward(m, prefix + ".proj", s.act);
}

Vec mlpBackward(Model& m, const std::string& prefix, const MlpSaved& s, const Vec& dy) {
  const Vec dact = linearBackward(m, prefix + ".proj", s.act, dy);
  Vec dfc(dact.size());
  ops::ref::activationBackward(m.c.activation.kind, s.fc.data(), dact.data(), dfc.data(),
                               int64_t(dfc.size()), m.c.activation.param);
  return linearBackward(m, prefix + ".fc", s.in, dfc);
}

// ---- A block (nn::block): pre-norm x + attn(ln1 x), x + mlp(ln2 x); post-norm
// ln1(attn(x) + x), ln2(mlp(x) + x).

struct BlockSaved {
  Vec x;       // the block's input (the input of ln1 in pre-norm)
  Vec s1, x1;  // post-norm: s1 = attn(x) + x, x1 = ln1(s1); pre-norm: x1 = x + attn(ln1 x)
  Vec s2;      // post-norm: mlp(x1) + x1, the input of ln2
  AttnSaved attn;
  MlpSaved mlp;
};

Vec blockForward(const Model& m, const std::string& prefix, const Vec& x, BlockSaved& s) {
  s.x = x;
  if (m.c.norm == nn::Norm::Pre) {
    s.x1 =
        add(x, attnForward(m, prefix + ".attn", layerNormForward(m, prefix + ".ln1", x), s.attn));
    return add(s.x1,
               mlpForward(m, prefix + ".mlp", layerNormForward(m, prefix + ".ln2", s.x1), s.mlp));
  }
  s.s1 = add(attnForward(m, prefix + ".attn", x, s.attn), x);
  s.x1 = layerNormForward(m, prefix + ".ln1", s.s1);
  s.s2 = add(mlpForward(m, prefix + ".mlp", s.x1, s.mlp), s.x1);
  return layerNormForward(m, prefix + ".ln2", s.s2);
}

// dout: d loss / d block output -> d loss / d block input. Where a tensor feeds a residual
// and a branch, its gradient is the sum of both (add, in double).
Vec blockBackward(Model& m, const std::string& prefix, const BlockSaved& s, const Vec& dout) {
  if (m.c.norm == nn::Norm::Pre) {
    const Vec dx1 = add(dout, layerNormBackward(m, prefix + ".ln2", s.x1,
                                                mlpBackward(m, prefix + ".mlp", s.mlp, dout)));
    return add(dx1, layerNormBackward(m, prefix + ".ln1", s.x,
                                      attnBackward(m, prefix + ".attn", s.attn, dx1)));
  }
  const Vec ds2 = layerNormBackward(m, prefix + ".ln2", s.s2, dout);
  const Vec dx1 = add(ds2, mlpBackward(m, prefix + ".mlp", s.mlp, ds2));
  const Vec ds1 = layerNormBackward(m, prefix + ".ln1", s.s1, dx1);
  return add(ds1, attnBackward(m, prefix + ".attn", s.attn, ds1));
}

// ---- Embedding: x[b,t] = tok[ids[b,t]] + pos[t], for t < T only.

Vec embeddingForward(const Model& m, std::span<const uint32_t> ids) {
  const int64_t c = m.c.width;
  Vec tok(size_t(m.rows() * c));
  ops::ref::gather(ids.data(), m.p("emb.tok"), tok.data(), m.rows(), m.c.vocab, c);
  const float* pos = m.p("emb.pos");
  for (int64_t r = 0; r < m.rows(); ++r)
    for (int64_t i = 0; i < c; ++i)
      tok[r * c + i] = float(double(tok[r * c + i]) + double(pos[(r % m.t) * c + i]));
  return tok;
}

// dx: (rows, C). accumulate: emb.tok already holds the tied head's gradient. Position rows
// >= T take no part, so their gradient stays 0.
void gatherBackward(Model& m, std::span<const uint32_t> ids, const Vec& dx, bool accumulate) {
  const int64_t c = m.c.width;
  ops::ref::gatherBackward(ids.data(), dx.data(), m.g("emb.tok"), m.rows(), m.c.vocab, c,
                           accumulate);
  float* dpos = m.g("emb.pos");
  for (int64_t t = 0; t < m.t; ++t)
    for (int64_t i = 0; i < c; ++i) {
      double sum = 0;
      for (int64_t b = 0; b < m.batch; ++b) sum += dx[(b * m.t + t) * c + i];
      dpos[t * c + i] = float(sum);
    }
}

std::string blockName(int64_t i) {
  return "h" + std::to_string(i);
}

}  // namespace

std::map<std::string, ops::Shape> gptReferenceShapes(const gpt::GptConfig& config) {
  const int64_t c = config.width, hidden = config.block().mlpHidden();
  std::map<std::string, ops::Shape> s;
  s["emb.tok"] = {config.vocab, c};
  s["emb.pos"] = {config.context, c};
  for (int64_t i = 0; i < config.layers; ++i) {
    const std::string h = blockName(i);
    for (const char* ln : {".ln1", ".ln2"}) {
      s[h + ln + ".g"] = {c};
      s[h + ln + ".b"] = {c};
    }
    s[h + ".attn.qkv.w"] = {c, 3 * c};
    s[h + ".attn.qkv.b"] = {3 * c};
    s[h + ".attn.proj.w"] = {c, c};
    s[h + ".attn.proj.b"] = {c};
    s[h + ".mlp.fc.w"] = {c, hidden};
    s[h + ".mlp.fc.b"] = {hidden};
    s[h + ".mlp.proj.w"] = {hidden, c};
    s[h + ".mlp.proj.b"] = {c};
  }
  if (config.norm == nn::Norm::Pre) {
    s["ln_f.g"] = {c};
    s["ln_f.b"] = {c};
  }
  if (!config.tie_weights) s["head.w"] = {c, config.vocab};
  return s;
}

GptReferenceStep gptReference(const gpt::GptConfig& config, const NamedArrays& params,
                              std::span<const uint32_t> ids, std::span<const uint32_t> targets,
                              int64_t batch, int64_t t) {
  config.validate();
  if (config.dropout != 0.0f) throw Error("gptReference: dropout must be 0");
  if (t > config.context || int64_t(ids.size()) != batch * t || targets.size() != ids.size())
    throw Error("gptReference: ids and targets must be (batch, t), t <= context");
  GptReferenceStep step;
  for (const auto& [name, shape] : gptReferenceShapes(config))
    step.grads[name].assign(size_t(shape.numel()), 0.0f);
  Model m{config, params, step.grads, batch, t};
  const bool pre = config.norm == nn::Norm::Pre;
  const int64_t rows = m.rows(), c = config.width, v = config.vocab;

  // Forward, saving what the backward pass reads.
  Vec x = embeddingForward(m, ids);
  std::vector<BlockSaved> blocks(size_t(config.layers));
  for (int64_t i = 0; i < config.layers; ++i)
    x = blockForward(m, blockName(i), x, blocks[size_t(i)]);
  const Vec final_in = x;  // (rows, C), the input of ln_f
  if (pre) x = layerNormForward(m, "ln_f", x);
  Vec logits(size_t(rows * v));
  ops::ref::MatmulArgs tied;  // x (rows, C) · tok (V, C)ᵀ
  tied.m = rows;
  tied.n = v;
  tied.k = c;
  tied.trans_b = true;
  if (config.tie_weights)
    ops::ref::matmul(x.data(), m.p("emb.tok"), nullptr, logits.data(), tied);
  else
    logits = linearForward(m, "head", x);
  Vec loss_rows(static_cast<size_t>(rows));
  step.loss = ops::ref::crossEntropy(logits.data(), targets.data(), loss_rows.data(), rows, v,
                                     ops::kCrossEntropyNoIgnore);

  // Backward, in reverse.
  Vec dlogits(logits.size());
  ops::ref::crossEntropyBackward(logits.data(), targets.data(), 1.0f, dlogits.data(), rows, v,
                                 ops::kCrossEntropyNoIgnore);
  Vec dx(size_t(rows * c));
  if (config.tie_weights)
    ops::ref::matmulBackward(x.data(), m.p("emb.tok"), dlogits.data(), dx.data(), m.g("emb.tok"),
                             nullptr, tied);
  else
    dx = linearBackward(m, "head", x, dlogits);
  if (pre) dx = layerNormBackward(m, "ln_f", final_in, dx);
  for (int64_t i = config.layers - 1; i >= 0; --i)
    dx = blockBackward(m, blockName(i), blocks[size_t(i)], dx);
  gatherBackward(m, ids, dx, /*accumulate=*/config.tie_weights);
  return step;
}

std::map<std::string, std::vector<double>> adamwReference(
    const std::map<std::string, ops::Shape>& shapes, const NamedArrays& params,
    const NamedArrays& grads, const graph::OptimizerConfig& config) {
  if (config.kind != graph::OptimizerConfig::Kind::AdamW || config.max_grad_norm > 0)
    throw Error("adamwReference: AdamW without clipping only");
  std::map<std::string, std::vector<double>> out;
  for (const auto& [name, shape] : shapes) {
    const std::vector<float>& p = params.at(name);
    std::vector<double> value(p.begin(), p.end()), m(p.size(), 0.0), v(p.size(), 0.0);
    const bool decay = config.decay_vectors || shape.rank() > 1;
    ops::ref::adamw(value, grads.at(name), m, v, config.lr, config.beta1, config.beta2,
                    config.adamw.eps, decay ? config.adamw.weight_decay : 0.0, /*t=*/1);
    out[name] = std::move(value);
  }
  return out;
}

}  // namespace vkgrad::test
