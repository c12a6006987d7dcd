// Every op that takes a parameter reads one stored in 16 bits (ParameterStore::setStorage):
// each small inference graph below gives what the same graph gives on an f32 store holding
// the values rounded to that format beforehand (the reference: f32 kernels, themselves
// checked against the CPU in their own tests), on odd shapes and random inputs.
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/ops/conv2d.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/ops/prepend_token.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/runtime/precision.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::ParameterStore;
using graph::Tensor;
using ops::DType;

void addParameters(ParameterStore& store) {
  store.add("w", {9, 13}, Init::xavierNormal());
  store.add("b", {13}, Init::uniform(-0.5f, 0.5f));
  store.add("gamma", {13}, Init::uniform(0.5f, 1.5f));
  store.add("beta", {13}, Init::uniform(-0.5f, 0.5f));
  store.add("pos", {5, 13}, Init::normal(0.0f, 1.0f));
  store.add("conv.w", {4, 3, 3, 3}, Init::xavierUniform());
  store.add("conv.b", {4}, Init::uniform(-0.5f, 0.5f));
  store.add("bn.gamma", {3}, Init::uniform(0.5f, 1.5f));
  store.add("bn.beta", {3}, Init::uniform(-0.5f, 0.5f));
  store.add("bn.running_mean", {3}, Init::uniform(-0.5f, 0.5f));
  store.add("bn.running_var", {3}, Init::uniform(0.5f, 2.0f));
}

// One op reading parameters: builds its output from the graph's inputs (made by `input`).
struct Case {
  std::string name;
  std::function<Tensor(Graph&, const std::function<Tensor(const char*)>& p,
                       const std::function<Tensor(const graph::Shape&)>& input)>
      build;
};

const Case kCases[] = {
    {"matmul",
     [](Graph& g, auto& p, auto& in) {
       return g.matmul(in({5, 9}), p("w"), p("b"));
     }},
    {"matmulAdd",
     [](Graph& g, auto& p, auto& in) {
       return g.matmulAdd(in({5, 9}), p("w"), p("b"), in({5, 13}));
     }},
    {"matmulActivation",
     [](Graph& g, auto& p, auto& in) {
       return g.matmulActivation(in({5, 9}), p("w"), p("b"), ops::Activation::GeluTanh);
     }},
    {"matmul transposed",
     [](Graph& g, auto& p, auto& in) {
       return g.matmul(in({5, 13}), p("w"), {}, false, true);
     }},
    {"batchMatmul",
     [](Graph& g, auto& p, auto& in) {
       return g.batchMatmul(in({2, 5, 9}), p("w"));
     }},
    {"layerNorm",
     [](Graph& g, auto& p, auto& in) {
       return g.layerNorm(in({5, 13}), p("gamma"), p("beta"));
     }},
    {"rmsNorm",
     [](Graph& g, auto& p, auto& in) {
       return g.rmsNorm(in({5, 13}), p("gamma"));
     }},
    {"add",
     [](Graph& g, auto& p, auto& in) {
       return g.add(in({2, 5, 13}), p("pos"));
     }},
    {"mul",
     [](Graph& g, auto& p, auto& in) {
       return g.mul(in({5, 13}), p("gamma"));
     }},
    {"sub",
     [](Graph& g, auto& p, auto& in) {
       return g.sub(p("b"), in({5, 13}));
     }},
    {"where",
     [](Graph& g, auto& p, auto&) {
       const Tensor cond = g.constant("cond", {13}, std::vector<float>(13, 0.0f));
       return g.add(p("gamma"), g.where(g.input("mask", {13}, DType::U32), p("b"), cond));
     }},
    {"prependToken",
     [](Graph& g, auto& p, auto& in) {
       return graph::prependToken(g, in({2, 5, 13}), p("b"));
     }},
    {"batchNorm",  // gamma and beta in 16 bits, the running statistics in f32
     [](Graph& g, auto& p, auto& in) {
       return g.batchNorm(in({2, 3, 5, 4}), p("bn.gamma"), p("bn.beta"), p("bn.running_mean"),
                          p("bn.running_var"));
     }},
    {"gather", [](Graph& g, auto& p,
                  auto&) { return g.gather(p("pos"), g.input("mask", {13}, DType::U32)); }},
    {"reshape",
     [](Graph& g, auto& p, auto& in) {
       return g.add(in({13, 9}), g.reshape(p("w"), {13, 9}));
     }},
    {"transpose",
     [](Graph& g, auto& p, auto&) {
       return g.transpose(p("w"), {1, 0});
     }},
    {"sliceAxis", [](Graph& g, auto& p, auto&) { return g.sliceAxis(p("w"), 1, 1, 12, 3); }},
    {"concat",
     [](Graph& g, auto& p, auto&) {
       return g.concat({p("pos"), p("w")}, 0);
     }},
    {"expand",
     [](Graph& g, auto& p, auto&) {
       return g.expand(p("b"), {3, 13});
     }},
    {"sum", [](Graph& g, auto& p, auto&) { return g.sum(p("w"), {0}); }},
    {"softmax", [](Graph& g, auto& p, auto&) { return g.softmax(p("pos"), 0); }},
};

class StoredParameterOpsTest : public VkTest, public ::testing::WithParamInterface<DType> {
 protected:
  // The case's output from store; inputs drawn from `seed` (the same for every store).
  std::vector<float> run(const Case& c, const ParameterStore& store, uint64_t seed) {
    std::mt19937_64 engine(seed);
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    Graph g;
    g.setTraining(false);
    std::vector<std::pair<Tensor, std::vector<float>>> inputs;
    const auto p = [&](const char* name) { return g.parameter(store.at(name)); };
    const auto in = [&](const graph::Shape& shape) {
      const Tensor t = g.input("x" + std::to_string(inputs.size()), shape);
      std::vector<float> values(size_t(shape.numel()));
      for (float& v : values) v = uniform(engine);
      inputs.emplace_back(t, std::move(values));
      return t;
    };
    const Tensor out = c.build(g, p, in);
    g.markOutput(out);
    graph::applyPrecision(g, graph::Precision::F32);
    graph::Executor exec(ctx(), g);
    for (const auto& [t, values] : inputs) exec.setInput(t, values);
    for (size_t t = 0; t < g.tensors().size(); ++t)
      if (g.tensor(int(t)).name == "mask")
        exec.setInput(Tensor{int(t)}, std::vector<uint32_t>{1, 0, 4, 4, 0, 1, 2, 3, 1, 0, 0, 2, 1});
    exec.step();
    return exec.read(out);
  }
};

TEST_P(StoredParameterOpsTest, ReadLikeF32WithPreRoundedValues) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const DType dtype = GetParam();
  ParameterStore stored(ctx()), f32(ctx());
  addParameters(stored), addParameters(f32);
  stored.initialize(rng.seed()), f32.initialize(rng.seed());
  for (const auto& p : stored.all()) stored.setFrozen(p->name, true);
  for (const auto& p : stored.all())
    if (!p->name.starts_with("conv.") && !p->name.starts_with("bn.running"))
      stored.setStorage(p->name, dtype);
  std::vector<graph::SavedTensor> rounded = f32.download();
  for (graph::SavedTensor& t : rounded)
    if (stored.at(t.name).dtype == dtype) t = graph::convertSaved(t, dtype);
  std::vector<const graph::SavedTensor*> ptrs;
  for (const graph::SavedTensor& t : rounded) ptrs.push_back(&t);
  f32.upload(ptrs, "rounded");
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    const uint64_t seed = rng.seed() + 1;
    try {
      EXPECT_TRUE(allClose(run(c, stored, seed), run(c, f32, seed), 1e-6));
    } catch (const Error& e) {
      ADD_FAILURE() << e.what();
    }
  }
}

// conv2d's weights and batch norm's running statistics are f32-only in their kernels: a graph
// that reads them in 16 bits is refused when compiled, naming the op and the tensor, before
// any GPU work.
TEST_P(StoredParameterOpsTest, RefuseWhereAKernelTakesOnlyF32) {
  const DType dtype = GetParam();
  ParameterStore store(ctx());
  addParameters(store);
  store.initialize(1);
  store.setFrozenPrefix("conv.", true);
  store.setFrozenPrefix("bn.", true);
  store.setStoragePrefix("conv.", dtype);
  store.setStoragePrefix("bn.running", dtype);
  const std::string name = ops::dtypeName(dtype);
  const Case refused[] = {
      {"conv2d: w must be f32, got " + name,
       [](Graph& g, auto& p, auto& in) {
         return g.conv2d(in({1, 3, 5, 5}), p("conv.w"), p("conv.b"),
                         ops::Conv2dParams::square(1, 0));
       }},
      {"batchNormInference: running_mean must be f32, got " + name,
       [](Graph& g, auto& p, auto& in) {
         return g.batchNorm(in({2, 3, 5, 4}), p("bn.gamma"), p("bn.beta"), p("bn.running_mean"),
                            p("bn.running_var"));
       }},
  };
  for (const Case& c : refused) {
    try {
      run(c, store, 2);
      ADD_FAILURE() << "no Error: " << c.name;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(c.name), std::string::npos) << e.what();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, StoredParameterOpsTest,
                         ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(ops::dtypeName(info.param)); });

}  // namespace
}  // namespace vkgrad::test
