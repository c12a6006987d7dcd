// The importer's fusions (onnx/fusions.h), each both ways: a model built in C++ imported
// with the fusions and without, the outputs of both against a CPU reference in doubles, and
// the gradients of every initializer (of sum(out ∘ w), w random) fused against node by node.
// Near misses (a mask that is not causal, a softmax over another axis, a scale that trains)
// import node by node and still compute the right thing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "common/compare.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "onnx/model_builder.h"
#include "vkgrad/onnx/importer.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/op.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::test {
namespace {

class OnnxFusionTest : public VkTest {
 protected:
  Rng rng_;
};

struct Outcome {
  std::vector<float> out;
  std::map<std::string, std::vector<float>> grads;  // of sum(out ∘ w), by initializer
  std::vector<std::string> fusions;
  size_t nodes = 0;  // the forward graph's, but reshapes (views: no kernel)
};

Outcome importAndRun(vk::Context& context, const onnx::Model& model,
                     const std::map<std::string, std::vector<float>>& inputs,
                     const std::vector<float>& w, bool fuse) {
  graph::Graph g;
  graph::ParameterStore store(context);
  onnx::ImportOptions options;
  options.fuse = fuse;
  onnx::addParameters(store, model, onnx::deviceInitializers(model, options));
  const onnx::Imported imported = onnx::importGraph(g, model, store, options);
  Outcome r;
  r.fusions = imported.fusions;
  for (const auto& n : g.nodes()) r.nodes += std::string(graph::opName(n.op)) != "reshape";
  const graph::Tensor y = imported.outputs[0].tensor;
  const graph::Gradients grads = graph::backward(g, y, g.constant("w", g.shape(y), w));
  graph::Executor ex(context, g);
  for (const onnx::Port& in : imported.inputs)
    if (in.tensor) ex.setInput(in.tensor, inputs.at(in.name));
  ex.step();
  r.out = ex.read(y);
  for (const auto& [param, grad] : grads.parameters)
    r.grads[g.tensor(param).parameter->name] = ex.read(grad);
  return r;
}

// Both ways against the reference, and the gradients of one against the other's.
void expectBothWays(vk::Context& context, const onnx::Model& model,
                    const std::map<std::string, std::vector<float>>& inputs,
                    const std::vector<float>& want, Rng& rng, size_t fusions,
                    double tolerance = 2e-6) {
  const std::vector<float> w = rng.normal(want.size());
  const Outcome fused = importAndRun(context, model, inputs, w, true);
  const Outcome plain = importAndRun(context, model, inputs, w, false);
  EXPECT_EQ(fused.fusions.size(), fusions);
  EXPECT_TRUE(plain.fusions.empty());
  if (fusions > 0) {
    EXPECT_LT(fused.nodes, plain.nodes);
  }
  EXPECT_TRUE(allClose(fused.out, want, tolerance)) << "fused";
  EXPECT_TRUE(allClose(plain.out, want, tolerance)) << "node by node";
  ASSERT_EQ(fused.grads.size(), plain.grads.size());
  for (const auto& [name, g] : plain.grads) {
    ASSERT_TRUE(fused.grads.count(name)) << name;
    // Two f32 computations of one gradient (sums in other orders): the error of each.
    EXPECT_TRUE(allClose(fused.grads.at(name), g, 2e-5)) << "gradient of " << name;
  }
}

// softmax(scale q kᵀ [causal]) v per (batch, head): q, k, v (B,T,H,D) flat -> (B,T,H,D).
std::vector<float> attentionRef(const std::vector<float>& q, const std::vector<float>& k,
                                const std::vector<float>& v, int64_t b, int64_t t, int64_t h,
                                int64_t d, double scale, bool causal) {
  std::vector<float> o(q.size());
  auto at = [&](int64_t bi, int64_t ti, int64_t hi) { return ((bi * t + ti) * h + hi) * d; };
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t hi = 0; hi < h; ++hi)
      for (int64_t i = 0; i < t; ++i) {
        std::vector<double> s(size_t(t), -INFINITY);
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < (causal ? i + 1 : t); ++j) {
          double dot = 0;
          for (int64_t e = 0; e < d; ++e)
            dot += double(q[size_t(at(bi, i, hi) + e)]) * k[size_t(at(bi, j, hi) + e)];
          s[size_t(j)] = dot * scale, mx = std::max(mx, s[size_t(j)]);
        }
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < t; ++j) acc += s[size_t(j)] / sum * v[size_t(at(bi, j, hi) + e)];
          o[size_t(at(bi, i, hi) + e)] = float(acc);
        }
      }
  return o;
}

// x (R,K) · W (K,N) + bias, in doubles.
std::vector<double> linearRef(const std::vector<float>& x, const std::vector<float>& w,
                              const std::vector<float>& bias, int64_t rows, int64_t k, int64_t n,
                              bool w_transposed = false) {
  std::vector<double> y(size_t(rows * n));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias.empty() ? 0.0 : bias[size_t(j)];
      for (int64_t e = 0; e < k; ++e)
        acc += double(x[size_t(r * k + e)]) * w[size_t(w_transposed ? j * k + e : e * n + j)];
      y[size_t(r * n + j)] = acc;
    }
  return y;
}

// The causal mask as PyTorch exports it: a registered tril buffer, == 0 -> Where(-inf).
void causalWhere(ModelBuilder& m, int64_t t, const std::string& scores, const std::string& out) {
  std::vector<float> tril(size_t(t * t));
  for (int64_t i = 0; i < t; ++i)
    for (int64_t j = 0; j <= i; ++j) tril[size_t(i * t + j)] = 1.0f;
  m.floats("tril", {1, 1, t, t}, tril).floats("zero", {}, {0.0f});
  m.floats("ninf", {}, {-std::numeric_limits<float>::infinity()});
  m.node("Equal", {"tril", "zero"}, {"masked"});
  m.node("Where", {"masked", "ninf", scores}, {out});
}

// A GPT block's attention: x (B,T,C) -> qkv = x W + b -> Split -> Reshape (B,T,H,D) ->
// head transposes -> q kᵀ * 1/sqrt(D) [causal] -> Softmax -> · v -> back to (B,T,C).
TEST_F(OnnxFusionTest, AttentionOverOneFusedProjectionIsFlashAttention) {
  SCOPED_TRACE(rng_.describe());
  const int64_t B = 2, T = 9, H = 3, D = 4, C = H * D;
  const auto x = rng_.normal(size_t(B * T * C));
  const auto w = rng_.normal(size_t(C * 3 * C), 0.0f, 0.4f);
  const auto bias = rng_.normal(size_t(3 * C), 0.0f, 0.2f);
  for (bool causal : {true, false}) {
    SCOPED_TRACE(causal ? "causal" : "no mask");
    ModelBuilder m;
    m.input("x", {B, T, C}).output("y");
    m.floats("w", {C, 3 * C}, w).floats("b", {3 * C}, bias);
    m.ints("sizes", {3}, {C, C, C}).ints("heads", {4}, {0, 0, H, D}).ints("merged", {3}, {B, T, C});
    m.constant("scale", float(1 / std::sqrt(double(D))));
    m.node("MatMul", {"x", "w"}, {"xw"});
    m.node("Add", {"b", "xw"}, {"qkv"});
    ModelBuilder::attrInt(m.node("Split", {"qkv", "sizes"}, {"q0", "k0", "v0"}), "axis", 2);
    for (const char* p : {"q", "k", "v"}) {
      m.node("Reshape", {std::string(p) + "0", "heads"}, {std::string(p) + "1"});
      ModelBuilder::attrInts(
          m.node("Transpose", {std::string(p) + "1"}, {std::string(p) + "t"}), "perm",
          *p == 'k' ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3});
    }
    m.node("MatMul", {"qt", "kt"}, {"s0"});
    m.node("Mul", {"s0", "scale"}, {"s1"});
    if (causal) causalWhere(m, T, "s1", "s2");
    ModelBuilder::attrInt(m.node("Softmax", {causal ? "s2" : "s1"}, {"p"}), "axis", -1);
    m.node("MatMul", {"p", "vt"}, {"o"});
    ModelBuilder::attrInts(m.node("Transpose", {"o"}, {"ot"}), "perm", {0, 2, 1, 3});
    m.node("Reshape", {"ot", "merged"}, {"y"});

    const auto qkv = linearRef(x, w, bias, B * T, C, 3 * C);
    std::vector<float> q, k, v;
    for (int64_t r = 0; r < B * T; ++r)
      for (int64_t j = 0; j < C; ++j) {
        q.push_back(float(qkv[size_t(r * 3 * C + j)]));
        k.push_back(float(qkv[size_t(r * 3 * C + C + j)]));
        v.push_back(float(qkv[size_t(r * 3 * C + 2 * C + j)]));
      }
    const auto want = attentionRef(q, k, v, B, T, H, D, 1 / std::sqrt(double(D)), causal);
    // The attention and the projection's bias epilogue.
    expectBothWays(ctx(), m.build(), {{"x", x}}, want, rng_, 2, 4e-6);
  }
}

// q, k, v given per head as (B,T,H,D) parameters, the scale a Div, the mask added (0 or
// -1e9), the output left as (B,H,T,D): the transposes absorbed, one added back.
TEST_F(OnnxFusionTest, AttentionOnSeparateTensorsWithAnAddedMask) {
  SCOPED_TRACE(rng_.describe());
  const int64_t B = 1, T = 7, H = 2, D = 8;
  const auto q = rng_.normal(size_t(B * T * H * D)), k = rng_.normal(size_t(B * T * H * D));
  const auto v = rng_.normal(size_t(B * T * H * D));
  auto model = [&](float masked) {
    std::vector<float> mask(size_t(T * T), 0.0f);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = i + 1; j < T; ++j) mask[size_t(i * T + j)] = masked;
    ModelBuilder m;
    m.input("q", {B, T, H, D}).output("y");
    m.floats("k", {B, T, H, D}, k).floats("v", {B, T, H, D}, v).floats("mask", {T, T}, mask);
    m.constant("sqrt_d", std::sqrt(float(D)));
    ModelBuilder::attrInts(m.node("Transpose", {"q"}, {"qt"}), "perm", {0, 2, 1, 3});
    ModelBuilder::attrInts(m.node("Transpose", {"k"}, {"kt"}), "perm", {0, 2, 3, 1});
    ModelBuilder::attrInts(m.node("Transpose", {"v"}, {"vt"}), "perm", {0, 2, 1, 3});
    m.node("MatMul", {"qt", "kt"}, {"s0"});
    m.node("Div", {"s0", "sqrt_d"}, {"s1"});
    m.node("Add", {"s1", "mask"}, {"s2"});
    ModelBuilder::attrInt(m.node("Softmax", {"s2"}, {"p"}), "axis", 3);
    m.node("MatMul", {"p", "vt"}, {"y"});
    return m.build();
  };
  const auto bthd = attentionRef(q, k, v, B, T, H, D, 1 / std::sqrt(double(D)), true);
  std::vector<float> want;  // (B,H,T,D)
  for (int64_t hi = 0; hi < H; ++hi)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < D; ++e) want.push_back(bthd[size_t((t * H + hi) * D + e)]);
  // A finite mask initializer is a parameter (a gradient reaches it: it would train), so no
  // constant: the pattern imports node by node. Filled with -inf (as a registered buffer is)
  // it is a constant, and the attention fuses.
  expectBothWays(ctx(), model(-1e9f), {{"q", q}}, want, rng_, 0, 4e-6);
  expectBothWays(ctx(), model(-std::numeric_limits<float>::infinity()), {{"q", q}}, want, rng_, 1,
                 4e-6);
}

// (B*H, T, D) products as nn.MultiheadAttention exports them: q scaled before the product,
// kᵀ by a last-two-axes transpose; fused as B*H one-head batches.
TEST_F(OnnxFusionTest, AttentionOverThreeAxisProductsIsOneHeadBatches) {
  SCOPED_TRACE(rng_.describe());
  const int64_t N = 3, T = 5, D = 6;
  const auto q = rng_.normal(size_t(N * T * D)), k = rng_.normal(size_t(N * T * D));
  const auto v = rng_.normal(size_t(N * T * D));
  ModelBuilder m;
  m.input("q", {N, T, D}).output("y");
  m.floats("k", {N, T, D}, k).floats("v", {N, T, D}, v);
  m.constant("sqrt_d", std::sqrt(float(D)));
  m.node("Div", {"q", "sqrt_d"}, {"qs"});
  ModelBuilder::attrInts(m.node("Transpose", {"k"}, {"kt"}), "perm", {0, 2, 1});
  m.node("MatMul", {"qs", "kt"}, {"s"});
  ModelBuilder::attrInt(m.node("Softmax", {"s"}, {"p"}), "axis", -1);
  m.node("MatMul", {"p", "v"}, {"y"});
  // (N, T, 1, D) is (B,T,H,D) with one head.
  const auto want = attentionRef(q, k, v, N, T, 1, D, 1 / std::sqrt(double(D)), false);
  expectBothWays(ctx(), m.build(), {{"q", q}}, want, rng_, 1, 4e-6);
}

TEST_F(OnnxFusionTest, MasksThatAreNotCausalAndOtherAxesImportNodeByNode) {
  SCOPED_TRACE(rng_.describe());
  const int64_t N = 2, T = 6, D = 4;
  const auto q = rng_.normal(size_t(N * T * D)), k = rng_.normal(size_t(N * T * D));
  const auto v = rng_.normal(size_t(N * T * D));
  for (int variant = 0; variant < 2; ++variant) {
    SCOPED_TRACE(variant == 0 ? "a mask that hides the diagonal" : "softmax over the queries");
    ModelBuilder m;
    m.input("q", {N, T, D}).output("y");
    m.floats("k", {N, T, D}, k).floats("v", {N, T, D}, v);
    ModelBuilder::attrInts(m.node("Transpose", {"k"}, {"kt"}), "perm", {0, 2, 1});
    m.node("MatMul", {"q", "kt"}, {"s"});
    std::vector<float> tril(size_t(T * T));
    // variant 0: query i sees keys j < i, and the first query sees key 0 (no empty row).
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < std::max<int64_t>(i, 1); ++j) tril[size_t(i * T + j)] = 1.0f;
    std::string scores = "s";
    if (variant == 0) {
      m.floats("tril", {T, T}, tril).floats("zero", {}, {0.0f});
      m.floats("ninf", {}, {-std::numeric_limits<float>::infinity()});
      m.node("Equal", {"tril", "zero"}, {"masked"});
      m.node("Where", {"masked", "ninf", "s"}, {"sm"});
      scores = "sm";
    }
    ModelBuilder::attrInt(m.node("Softmax", {scores}, {"p"}), "axis", variant == 0 ? -1 : 1);
    m.node("MatMul", {"p", "v"}, {"y"});
    std::vector<float> want(size_t(N * T * D));
    for (int64_t n = 0; n < N; ++n) {
      std::vector<double> s(size_t(T * T));
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) {
          double dot = 0;
          for (int64_t e = 0; e < D; ++e)
            dot += double(q[size_t((n * T + i) * D + e)]) * k[size_t((n * T + j) * D + e)];
          s[size_t(i * T + j)] = variant == 0 && tril[size_t(i * T + j)] == 0 ? -INFINITY : dot;
        }
      // Softmax along keys (variant 0) or along queries (variant 1).
      std::vector<double> p(s.size());
      for (int64_t a = 0; a < T; ++a) {
        double mx = -INFINITY, sum = 0;
        auto idx = [&](int64_t b) { return size_t(variant == 0 ? a * T + b : b * T + a); };
        for (int64_t b = 0; b < T; ++b) mx = std::max(mx, s[idx(b)]);
        for (int64_t b = 0; b < T; ++b) sum += (p[idx(b)] = std::exp(s[idx(b)] - mx));
        for (int64_t b = 0; b < T; ++b) p[idx(b)] /= sum;
      }
      for (int64_t i = 0; i < T; ++i)
        for (int64_t e = 0; e < D; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < T; ++j)
            acc += p[size_t(i * T + j)] * v[size_t((n * T + j) * D + e)];
          want[size_t((n * T + i) * D + e)] = float(acc);
        }
    }
    expectBothWays(ctx(), m.build(), {{"q", q}}, want, rng_, 0, 4e-6);
  }
}

// Layer norm as exports before opset 17 write it, with gamma and beta, d² as Pow or Mul.
TEST_F(OnnxFusionTest, LayerNormWrittenOutIsTheKernel) {
  SCOPED_TRACE(rng_.describe());
  const int64_t R = 5, K = 4, N = 37;
  const float eps = 1e-5f;
  const auto x = rng_.normal(size_t(R * K));
  const auto w = rng_.normal(size_t(K * N));
  const auto gamma = rng_.normal(size_t(N), 1.0f, 0.3f), beta = rng_.normal(size_t(N), 0.0f, 0.3f);
  for (bool pow : {true, false}) {
    SCOPED_TRACE(pow ? "Pow(d, 2)" : "Mul(d, d)");
    ModelBuilder m(13);
    m.input("x", {R, K}).output("y");
    m.floats("w", {K, N}, w).floats("gamma", {N}, gamma).floats("beta", {N}, beta);
    m.constant("two", 2.0f);
    m.constant("eps", eps);
    m.node("MatMul", {"x", "w"}, {"h"});  // (a gradient to pass through the fused norm)
    ModelBuilder::attrInts(m.node("ReduceMean", {"h"}, {"mean"}), "axes", {-1});
    m.node("Sub", {"h", "mean"}, {"d"});
    if (pow)
      m.node("Pow", {"d", "two"}, {"d2"});
    else
      m.node("Mul", {"d", "d"}, {"d2"});
    ModelBuilder::attrInts(m.node("ReduceMean", {"d2"}, {"var"}), "axes", {-1});
    m.node("Add", {"var", "eps"}, {"ve"});
    m.node("Sqrt", {"ve"}, {"sd"});
    m.node("Div", {"d", "sd"}, {"n"});
    m.node("Mul", {"n", "gamma"}, {"ng"});
    m.node("Add", {"ng", "beta"}, {"y"});
    const auto h = linearRef(x, w, {}, R, K, N);
    std::vector<float> want;
    for (int64_t r = 0; r < R; ++r) {
      double mean = 0, var = 0;
      for (int64_t j = 0; j < N; ++j) mean += h[size_t(r * N + j)] / N;
      for (int64_t j = 0; j < N; ++j) var += std::pow(h[size_t(r * N + j)] - mean, 2) / N;
      for (int64_t j = 0; j < N; ++j)
        want.push_back(
            float((h[size_t(r * N + j)] - mean) / std::sqrt(var + eps) * gamma[size_t(j)] +
                  beta[size_t(j)]));
    }
    expectBothWays(ctx(), m.build(), {{"x", x}}, want, rng_, 1, 4e-6);
  }
}

// Linear layers as training exports write them (Transpose of an (out, in) weight, MatMul,
// Add of the bias) with a Relu after, then a residual Add; and Gemm + Sigmoid.
TEST_F(OnnxFusionTest, MatmulEpiloguesTakeTheBiasActivationAndResidual) {
  SCOPED_TRACE(rng_.describe());
  const int64_t B = 3, T = 5, K = 6, N = 9;
  const auto x = rng_.normal(size_t(B * T * K));
  const auto w1 = rng_.normal(size_t(N * K), 0.0f, 0.5f), b1 = rng_.normal(size_t(N));
  const auto w2 = rng_.normal(size_t(N * K), 0.0f, 0.5f), b2 = rng_.normal(size_t(K));
  {
    ModelBuilder m;
    m.input("x", {B, T, K}).output("y");
    m.floats("w1", {N, K}, w1).floats("b1", {N}, b1).floats("w2", {N, K}, w2).floats("b2", {K}, b2);
    ModelBuilder::attrInts(m.node("Transpose", {"w1"}, {"w1t"}), "perm", {1, 0});
    m.node("MatMul", {"x", "w1t"}, {"h0"});
    m.node("Add", {"b1", "h0"}, {"h1"});
    m.node("Relu", {"h1"}, {"h"});
    m.node("MatMul", {"h", "w2"}, {"z0"});  // w2 (N,K) read as (K',N') = (9,6): h (.., 9)
    m.node("Add", {"z0", "b2"}, {"z1"});
    m.node("Add", {"x", "z1"}, {"y"});
    const auto h1 = linearRef(x, w1, b1, B * T, K, N, true);
    std::vector<float> h;
    for (double v : h1) h.push_back(float(std::max(v, 0.0)));
    const auto z = linearRef(h, w2, b2, B * T, N, K);
    std::vector<float> want;
    for (size_t i = 0; i < z.size(); ++i) want.push_back(float(z[i] + x[i]));
    expectBothWays(ctx(), m.build(), {{"x", x}}, want, rng_, 2, 4e-6);
  }
  {
    ModelBuilder m;
    m.input("x", {B * T, K}).output("y");
    m.floats("w1", {N, K}, w1).floats("b1", {N}, b1);
    ModelBuilder::attrInt(m.node("Gemm", {"x", "w1", "b1"}, {"g"}), "transB", 1);
    m.node("Sigmoid", {"g"}, {"y"});
    std::vector<float> want;
    for (double v : linearRef(x, w1, b1, B * T, K, N, true))
      want.push_back(float(1 / (1 + std::exp(-v))));
    expectBothWays(ctx(), m.build(), {{"x", x}}, want, rng_, 1, 4e-6);
  }
}

// A product's output read by two nodes keeps its own node: nothing fuses across a fork.
TEST_F(OnnxFusionTest, AValueReadTwiceIsNotFusedAway) {
  SCOPED_TRACE(rng_.describe());
  const int64_t R = 4, K = 3, N = 5;
  const auto x = rng_.normal(size_t(R * K)), w = rng_.normal(size_t(K * N));
  const auto b = rng_.normal(size_t(N));
  ModelBuilder m;
  m.input("x", {R, K}).output("y");
  m.floats("w", {K, N}, w).floats("b", {N}, b);
  m.node("MatMul", {"x", "w"}, {"h0"});
  m.node("Add", {"h0", "b"}, {"h"});
  m.node("Relu", {"h"}, {"r"});
  m.node("Mul", {"r", "h"}, {"y"});  // h read by Relu and by Mul: the Relu stays apart
  std::vector<float> want;
  for (double v : linearRef(x, w, b, R, K, N)) want.push_back(float(std::max(v, 0.0) * v));
  // The bias still joins the product (only h's readers differ).
  expectBothWays(ctx(), m.build(), {{"x", x}}, want, rng_, 1, 4e-6);
}

}  // namespace
}  // namespace vkgrad::test
