// The ONNX importer on small models built in C++ (onnx/model_builder.h): results against CPU
// references, host folding of shape arithmetic, which initializers become parameters,
// fine-tuning against a CPU SGD, and the errors bad models and inputs get.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "common/compare.h"
#include "common/error_text.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "onnx/model_builder.h"
#include "vkgrad/onnx/importer.h"
#include "vkgrad/onnx/runner.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::test {
namespace {

using onnx::HostTensor;

class OnnxImportTest : public VkTest {
 protected:
  Rng rng_;
};

// Gather (token ids) -> MatMul -> Add -> GELU written out with Erf (as exporters do) ->
// ReduceSum over the sequence axis, against loops on the host.
TEST_F(OnnxImportTest, AnEmbeddingMlpMatchesTheCpu) {
  SCOPED_TRACE(rng_.describe());
  const int64_t B = 3, T = 5, V = 11, D = 7, H = 6;
  const auto emb = rng_.normal(V * D), w = rng_.normal(D * H), b = rng_.normal(H);
  ModelBuilder m;
  m.input("ids", {B, T}, onnx::kInt64).output("g").output("s");
  m.floats("emb", {V, D}, emb).floats("w", {D, H}, w).floats("b", {H}, b);
  m.constant("sqrt2", std::sqrt(2.0f)).constant("one", 1.0f).constant("half", 0.5f);
  m.ints("axes", {1}, {1});
  m.node("Gather", {"emb", "ids"}, {"e"});
  m.node("MatMul", {"e", "w"}, {"m"});
  m.node("Add", {"m", "b"}, {"h"});
  m.node("Div", {"h", "sqrt2"}, {"d"});
  m.node("Erf", {"d"}, {"erf"});
  m.node("Add", {"erf", "one"}, {"e1"});
  m.node("Mul", {"h", "e1"}, {"he"});
  m.node("Mul", {"he", "half"}, {"g"});
  ModelBuilder::attrInt(m.node("ReduceSum", {"g", "axes"}, {"s"}), "keepdims", 0);
  const onnx::Model model = m.build();

  const std::vector<uint32_t> ids = rng_.below(size_t(B * T), uint32_t(V));
  std::vector<int64_t> ids64(ids.begin(), ids.end());
  std::vector<float> g_want(size_t(B * T * H)), s_want(size_t(B * H), 0.0f);
  for (int64_t r = 0; r < B * T; ++r)
    for (int64_t j = 0; j < H; ++j) {
      double h = b[size_t(j)];
      for (int64_t k = 0; k < D; ++k)
        h += double(emb[size_t(ids[size_t(r)] * D + k)]) * w[size_t(k * H + j)];
      const double g = 0.5 * h * (1.0 + std::erf(h / std::sqrt(2.0)));
      g_want[size_t(r * H + j)] = float(g);
      s_want[size_t(r / T * H + j)] += float(g);
    }
  onnx::Runner runner(ctx(), model);
  const auto out = runner.run({{"ids", HostTensor::ofInts({B, T}, ids64)}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].dims, (std::vector<int64_t>{B, T, H}));
  EXPECT_EQ(out[1].dims, (std::vector<int64_t>{B, H}));
  // f32 dot products of 7 terms and the erf's few ulp.
  EXPECT_TRUE(allClose(out[0].floats, g_want, 2e-6));
  EXPECT_TRUE(allClose(out[1].floats, s_want, 2e-6));
  // The GELU fuses (its constants are then never read on the device).
  EXPECT_EQ(runner.imported().fusions.size(), 1u);
  EXPECT_EQ(runner.imported().parameters, (std::vector<std::string>{"emb", "w", "b"}));
}

// Shape -> Gather -> Unsqueeze -> Concat -> Reshape, as a dynamic-batch export writes
// x.view(x.size(0), -1): folded on the host to one reshape.
TEST_F(OnnxImportTest, ShapeArithmeticFoldsToOneReshape) {
  SCOPED_TRACE(rng_.describe());
  ModelBuilder m;
  m.input("x", {2, 3, 5}).output("y");
  m.ints("zero", {}, {0}).ints("minus1", {1}, {-1}).ints("axes0", {1}, {0});
  m.node("Shape", {"x"}, {"shape"});
  m.node("Gather", {"shape", "zero"}, {"n"});
  m.node("Unsqueeze", {"n", "axes0"}, {"n1"});
  ModelBuilder::attrInt(m.node("Concat", {"n1", "minus1"}, {"target"}), "axis", 0);
  m.node("Reshape", {"x", "target"}, {"y"});
  const onnx::Model model = m.build();
  graph::Graph g;
  graph::ParameterStore store(ctx());
  const onnx::Imported imported = onnx::importGraph(g, model, store);
  EXPECT_EQ(imported.outputs[0].dims, (std::vector<int64_t>{2, 15}));
  // The reshape and the copy that makes the output an activation: nothing else.
  EXPECT_EQ(g.nodes().size(), 2u);
  onnx::Runner runner(ctx(), model);
  const auto x = rng_.normal(30);
  EXPECT_EQ(runner.run({{"x", HostTensor::ofFloats({2, 3, 5}, x)}})[0].floats, x);
}

// A float initializer that only a comparison reads (a causal mask buffer) folds on the host;
// the weight the output's gradient reaches is the one parameter.
TEST_F(OnnxImportTest, BuffersFoldAndOnlyWeightsAreParameters) {
  SCOPED_TRACE(rng_.describe());
  const int64_t N = 4;
  std::vector<float> mask(N * N), w = rng_.normal(N * N);
  for (int64_t i = 0; i < N; ++i)
    for (int64_t j = 0; j < N; ++j) mask[size_t(i * N + j)] = j <= i ? 1.0f : 0.0f;
  ModelBuilder m;
  m.input("x", {2, N, N}).output("y");
  m.floats("w", {N, N}, w).floats("mask", {N, N}, mask).floats("zero", {}, {0.0f});
  m.floats("ninf", {}, {-std::numeric_limits<float>::infinity()});
  m.node("MatMul", {"x", "w"}, {"xw"});
  m.node("Equal", {"mask", "zero"}, {"masked"});
  m.node("Where", {"masked", "ninf", "xw"}, {"scores"});
  m.node("Softmax", {"scores"}, {"y"});
  const onnx::Model model = m.build();
  EXPECT_EQ(onnx::deviceInitializers(model, {}), (std::vector<std::string>{"w"}));
  // Row i of each (N,N) score matrix keeps columns 0..i: a causal softmax.
  const auto x = rng_.normal(2 * N * N);
  onnx::Runner runner(ctx(), model);
  const auto y = runner.run({{"x", HostTensor::ofFloats({2, N, N}, x)}})[0];
  ASSERT_EQ(y.dims, (std::vector<int64_t>{2, N, N}));
  std::vector<float> want(y.floats.size());
  for (int64_t r = 0; r < 2 * N; ++r) {
    const int64_t i = r % N;
    std::vector<double> e(size_t(N), 0.0);
    double sum = 0;
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0;
      for (int64_t k = 0; k < N; ++k) s += double(x[size_t(r * N + k)]) * w[size_t(k * N + j)];
      e[size_t(j)] = std::exp(s);
      sum += e[size_t(j)];
    }
    for (int64_t j = 0; j < N; ++j) want[size_t(r * N + j)] = float(e[size_t(j)] / sum);
  }
  EXPECT_TRUE(allClose(y.floats, want, 2e-6));
}

// Plain SGD on y = x W + b with an MSE loss, five steps of four rows, against the same
// arithmetic on the host in doubles.
TEST_F(OnnxImportTest, FineTuningMatchesSgdOnTheCpu) {
  SCOPED_TRACE(rng_.describe());
  const int64_t N = 8, I = 3, O = 2, B = 4;
  std::vector<float> w = rng_.normal(I * O), b = rng_.normal(O);
  const auto x = rng_.normal(N * I), t = rng_.normal(N * O);
  ModelBuilder m;
  m.input("x", {-1, I}).output("y");
  m.floats("w", {I, O}, w).floats("b", {O}, b);
  m.node("MatMul", {"x", "w"}, {"xw"});
  m.node("Add", {"xw", "b"}, {"y"});
  const onnx::Model model = m.build();
  onnx::FineTuneOptions options;
  options.optimizer.kind = graph::OptimizerConfig::Kind::Sgd;
  options.optimizer.sgd.momentum = 0.0f;
  options.optimizer.lr = 0.1f;
  options.batch = B;
  onnx::FineTuner tuner(ctx(), model, {{"x", HostTensor::ofFloats({N, I}, x)}},
                        HostTensor::ofFloats({N, O}, t), options);
  std::vector<double> W(w.begin(), w.end()), Bv(b.begin(), b.end());
  for (int step = 0; step < 5; ++step) {
    std::vector<uint32_t> rows;
    for (int64_t r = 0; r < B; ++r) rows.push_back(uint32_t((step * B + r) % N));
    double loss = 0;
    std::vector<double> dW(W.size(), 0.0), dB(Bv.size(), 0.0);
    for (uint32_t r : rows)
      for (int64_t o = 0; o < O; ++o) {
        double y = Bv[size_t(o)];
        for (int64_t i = 0; i < I; ++i) y += double(x[r * I + i]) * W[size_t(i * O + o)];
        const double d = y - t[r * O + o];
        loss += d * d / double(B * O);
        const double dy = 2.0 * d / double(B * O);
        dB[size_t(o)] += dy;
        for (int64_t i = 0; i < I; ++i) dW[size_t(i * O + o)] += double(x[r * I + i]) * dy;
      }
    const float got = tuner.step(rows);
    EXPECT_NEAR(got, loss, 1e-5 * std::max(1.0, loss)) << "step " << step;
    for (size_t k = 0; k < W.size(); ++k) W[k] -= 0.1 * dW[k];
    for (size_t k = 0; k < Bv.size(); ++k) Bv[k] -= 0.1 * dB[k];
  }
  const auto values = tuner.values();
  EXPECT_TRUE(allClose(values.at("w"), std::vector<float>(W.begin(), W.end()), 1e-5));
  EXPECT_TRUE(allClose(values.at("b"), std::vector<float>(Bv.begin(), Bv.end()), 1e-5));
}

TEST(OnnxModelTest, BadFilesAreRefusedWithWhy) {
  EXPECT_NE(
      errorText([] { onnx::Model::parse("\x12\xff garbage", "bad.onnx"); }).find("does not parse"),
      std::string::npos);
  ModelBuilder old(11);
  old.input("x", {2}).output("y");
  old.node("Relu", {"x"}, {"y"});
  EXPECT_NE(errorText([&] { old.build(); }).find("opset 11"), std::string::npos);
  ModelBuilder dangling;
  dangling.input("x", {2}).output("y");
  dangling.node("Add", {"x", "nowhere"}, {"y"});
  EXPECT_NE(errorText([&] { dangling.build(); }).find("dangling"), std::string::npos);
  ModelBuilder cycle;
  cycle.input("x", {2}).output("z");
  cycle.node("Add", {"x", "z"}, {"y"});
  cycle.node("Relu", {"y"}, {"z"});
  EXPECT_NE(errorText([&] { cycle.build(); }).find("a cycle"), std::string::npos);
  ModelBuilder external;
  external.input("x", {2}).output("y");
  external.floats("w", {2}, {});
  auto& w = external.proto().mutable_graph()->mutable_initializer()->at(0);
  w.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* kv = w.add_external_data();
  kv->set_key("location");
  kv->set_value("weights.bin");
  external.node("Add", {"x", "w"}, {"y"});
  EXPECT_NE(errorText([&] { external.build(); }).find("is missing"), std::string::npos);
  ModelBuilder escape = external;
  escape.proto().mutable_graph()->mutable_initializer(0)->mutable_external_data(0)->set_value(
      "../../etc/passwd");
  EXPECT_NE(errorText([&] { escape.build(); }).find("inside the model's folder"),
            std::string::npos);
}

TEST_F(OnnxImportTest, UnsupportedOpsAndBadInputsAreNamed) {
  SCOPED_TRACE(rng_.describe());
  ModelBuilder m;
  m.input("x", {-1, 3}).output("y");
  m.node("Relu", {"x"}, {"r"});
  m.node("Hardmax", {"r"}, {"y"}).set_name("the_hardmax");
  const onnx::Model model = m.build();
  EXPECT_EQ(onnx::unsupportedNodes(model),
            (std::vector<std::string>{"Hardmax (node \"the_hardmax\")"}));
  graph::Graph g;
  graph::ParameterStore store(ctx());
  EXPECT_NE(errorText([&] { onnx::importGraph(g, model, store); }).find("unsupported ops: Hardmax"),
            std::string::npos);

  ModelBuilder ok;
  ok.input("x", {-1, 3}).output("y");
  ok.node("Relu", {"x"}, {"y"});
  const onnx::Model relu = ok.build();
  onnx::Runner runner(ctx(), relu);
  // The open batch axis takes any size; each new shape compiles its own graph, kept.
  for (int64_t rows : {2, 5, 2}) {
    std::vector<float> x = rng_.normal(size_t(rows * 3)), want = x;
    for (float& v : want) v = std::max(v, 0.0f);
    const auto y = runner.run({{"x", HostTensor::ofFloats({rows, 3}, x)}});
    EXPECT_EQ(y[0].dims, (std::vector<int64_t>{rows, 3}));
    EXPECT_EQ(y[0].floats, want);
  }
  EXPECT_NE(errorText([&] {
              runner.run({{"z", HostTensor::ofFloats({2, 3}, std::vector<float>(6, 1.0f))}});
            }).find("no input \"z\""),
            std::string::npos);
  EXPECT_NE(errorText([&] {
              runner.run({{"x", HostTensor::ofInts({2, 3}, std::vector<int64_t>(6, 1))}});
            }).find("was given integers"),
            std::string::npos);
  EXPECT_NE(errorText([&] {
              runner.run({{"x", HostTensor::ofFloats({2, 4}, std::vector<float>(8, 1.0f))}});
            }).find("cannot take shape"),
            std::string::npos);
  onnx::ImportOptions huge;
  huge.input_dims["x"] = {int64_t(1) << 40, 3};
  EXPECT_NE(errorText([&] { onnx::deviceInitializers(relu, huge); }).find("2^31"),
            std::string::npos);
}

}  // namespace
}  // namespace vkgrad::test

namespace vkgrad::test {
namespace {

// GELU as exporters write it: erf form (PyTorch's nn.GELU()) with `half` as its last factor,
// tanh form (approximate="tanh"). x: (B, N). The constants are Constant nodes, as exporters
// write them, or (initializers) float initializers, which a gradient reaches: parameters.
onnx::Model geluModel(bool tanh_form, float half, bool inner_is_output = false,
                      bool initializers = false) {
  ModelBuilder m;
  m.input("x", {3, 7}).output("y");
  if (inner_is_output) m.output("t");
  auto constant = [&](const char* name, float value) {
    if (initializers)
      m.floats(name, {}, {value});
    else
      m.constant(name, value);
  };
  constant("half", half);
  constant("one", 1.0f);
  if (!tanh_form) {
    constant("sqrt2", std::sqrt(2.0f));
    m.node("Div", {"x", "sqrt2"}, {"d"});
    m.node("Erf", {"d"}, {"t"});
  } else {
    constant("c", 0.044715f);
    constant("k", float(std::sqrt(2.0 / std::numbers::pi)));
    m.node("Mul", {"x", "x"}, {"x2"});
    m.node("Mul", {"x", "x2"}, {"x3"});
    m.node("Mul", {"c", "x3"}, {"cx3"});
    m.node("Add", {"x", "cx3"}, {"s"});
    m.node("Mul", {"k", "s"}, {"ks"});
    m.node("Tanh", {"ks"}, {"t"});
  }
  m.node("Add", {"one", "t"}, {"a"});
  m.node("Mul", {"x", "a"}, {"xa"});
  m.node("Mul", {"xa", "half"}, {"y"});
  return m.build();
}

std::vector<float> runOn(vk::Context& context, const onnx::Model& model,
                         const std::vector<float>& x, bool fuse, size_t* nodes = nullptr,
                         size_t* fusions = nullptr) {
  graph::Graph g;
  graph::ParameterStore store(context);
  onnx::ImportOptions options;
  options.fuse = fuse;
  onnx::addParameters(store, model, onnx::deviceInitializers(model, options));
  const onnx::Imported imported = onnx::importGraph(g, model, store, options);
  if (nodes) *nodes = g.nodes().size();
  if (fusions) *fusions = imported.fusions.size();
  graph::Executor ex(context, g);
  ex.setInput(imported.inputs[0].tensor, x);
  ex.step();
  return ex.read(imported.outputs[0].tensor);
}

TEST_F(OnnxImportTest, GeluPatternsFuseToOneActivationWithTheSameResults) {
  SCOPED_TRACE(rng_.describe());
  const auto x = rng_.normal(21, 0.0f, 2.0f);
  for (bool tanh_form : {false, true}) {
    SCOPED_TRACE(tanh_form ? "tanh form" : "erf form");
    const onnx::Model model = geluModel(tanh_form, 0.5f);
    size_t fused_nodes = 0, plain_nodes = 0, fusions = 0;
    const auto fused = runOn(ctx(), model, x, true, &fused_nodes, &fusions);
    const auto plain = runOn(ctx(), model, x, false, &plain_nodes);
    EXPECT_EQ(fusions, 1u);
    EXPECT_EQ(fused_nodes, 1u);  // the activation alone
    EXPECT_GT(plain_nodes, 4u);
    std::vector<float> want;
    for (float v : x) {
      const double d = v;
      want.push_back(float(tanh_form ? 0.5 * d *
                                           (1 + std::tanh(std::sqrt(2 / std::numbers::pi) *
                                                          (d + 0.044715 * d * d * d)))
                                     : 0.5 * d * (1 + std::erf(d / std::sqrt(2.0)))));
    }
    // Both within a few ulp of the exact function (the activation's tanh/erf, or the
    // elementwise chain's roundings).
    EXPECT_TRUE(allClose(fused, want, 2e-6));
    EXPECT_TRUE(allClose(plain, want, 2e-6));
  }
}

TEST_F(OnnxImportTest, NearMissesAndSharedInnerValuesDoNotFuse) {
  SCOPED_TRACE(rng_.describe());
  const auto x = rng_.normal(21);
  size_t fusions = 1;
  // 0.6 x (1 + erf(x / sqrt 2)) is not GELU: imported node by node.
  const auto y = runOn(ctx(), geluModel(false, 0.6f), x, true, nullptr, &fusions);
  EXPECT_EQ(fusions, 0u);
  std::vector<float> want;
  for (float v : x) want.push_back(float(0.6 * v * (1 + std::erf(double(v) / std::sqrt(2.0)))));
  EXPECT_TRUE(allClose(y, want, 2e-6));
  // erf(x / sqrt 2) also an output: the pattern's inner value is needed, so no fusion.
  fusions = 1;
  runOn(ctx(), geluModel(false, 0.5f, true), x, true, nullptr, &fusions);
  EXPECT_EQ(fusions, 0u);
  // Its constants float initializers: parameters (fine-tuning would train them, as it does
  // node by node), so the pattern keeps its nodes.
  fusions = 1;
  const auto z = runOn(ctx(), geluModel(true, 0.5f, false, true), x, true, nullptr, &fusions);
  EXPECT_EQ(fusions, 0u);
  const auto fused = runOn(ctx(), geluModel(true, 0.5f), x, true, nullptr, &fusions);
  EXPECT_EQ(fusions, 1u);
  EXPECT_TRUE(allClose(z, fused, 2e-6));
}

}  // namespace
}  // namespace vkgrad::test
