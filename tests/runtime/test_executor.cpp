#include "vkgrad/runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/gather.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/training/optimizer.h"
#include "vkgrad/vk/error.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::Tensor;

class ExecutorTest : public VkTest {
 protected:
  static std::vector<float> read(const graph::Parameter& p) { return download(ctx(), p.view()); }
  static std::vector<std::vector<float>> readAll(const graph::ParameterStore& store) {
    std::vector<std::vector<float>> out;
    for (const auto& p : store.all()) out.push_back(read(*p));
    return out;
  }
};

// A classifier MLP: x (batch, features) -> hidden layers -> classes, cross-entropy loss.
struct Classifier {
  Graph g;
  Tensor x, y, loss, state;
  graph::Gradients grads;
};
void buildClassifier(Classifier& c, graph::ParameterStore& store, int batch, int features,
                     std::vector<int> widths, int classes, ops::Activation act,
                     const graph::OptimizerConfig* optimizer) {
  c.x = c.g.input("x", {batch, features});
  c.y = c.g.input("y", {batch}, ops::DType::U32);
  Tensor h = c.x;
  int in = features;
  widths.push_back(classes);
  for (size_t i = 0; i < widths.size(); ++i) {
    const std::string name = "l" + std::to_string(i);
    const Tensor w = c.g.parameter(store.add(name + ".w", {in, widths[i]}, Init::xavierUniform()));
    const Tensor b = c.g.parameter(store.add(name + ".b", {widths[i]}, Init::zeros()));
    h = c.g.matmul(h, w, b);
    if (i + 1 < widths.size()) h = c.g.activation(h, act);
    in = widths[i];
  }
  c.loss = c.g.crossEntropy(h, c.y);
  c.g.markOutput(c.loss);
  c.grads = graph::backward(c.g, c.loss);
  if (optimizer) c.state = graph::addOptimizer(c.g, c.grads, *optimizer);
}

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Three arms of a 2-D spiral, one class per arm, with a little noise.
void spirals(Rng& rng, int per_class, std::vector<float>& x, std::vector<uint32_t>& y) {
  const std::vector<float> noise = rng.normal(size_t(per_class) * 6, 0.0f, 0.02f);
  for (int c = 0; c < 3; ++c)
    for (int i = 0; i < per_class; ++i) {
      const float r = float(i + 1) / float(per_class);
      const float t = 4.0f * r + 2.0944f * float(c);
      const size_t k = size_t(c * per_class + i);
      x.push_back(r * std::sin(t) + noise[2 * k]);
      x.push_back(r * std::cos(t) + noise[2 * k + 1]);
      y.push_back(uint32_t(c));
    }
}

// A replayed step (the one recording submitted again) and a step recorded afresh give the
// same bits: loss, every updated parameter, over several AdamW steps.
TEST_F(ExecutorTest, ReplayedStepsAreBitIdenticalToFreshlyRecordedOnes) {
  Rng rng;
  const graph::OptimizerConfig adamw{graph::OptimizerConfig::Kind::AdamW, 1e-2f};
  graph::ParameterStore store_a(ctx()), store_b(ctx());
  Classifier a, b;
  buildClassifier(a, store_a, 17, 5, {12, 9}, 4, ops::Activation::GeluTanh, &adamw);
  buildClassifier(b, store_b, 17, 5, {12, 9}, 4, ops::Activation::GeluTanh, &adamw);
  store_a.initialize(rng.seed());
  store_b.initialize(rng.seed());
  graph::Executor replayed(ctx(), a.g), fresh(ctx(), b.g);
  const std::vector<float> x = rng.normal(17 * 5);
  std::vector<uint32_t> y(17);
  for (auto& v : y) v = rng.below(4);
  for (graph::Executor* e : {&replayed, &fresh}) {
    e->setInput((e == &replayed ? a : b).x, x);
    e->setInput((e == &replayed ? a : b).y, y);
  }
  const auto initial = readAll(store_a);
  for (int step = 0; step < 4; ++step) {
    replayed.step();
    fresh.rerecord();
    fresh.step();
    EXPECT_EQ(bits(replayed.readScalar(a.loss)), bits(fresh.readScalar(b.loss))) << step;
    EXPECT_TRUE(std::isfinite(replayed.readScalar(a.loss)));
  }
  const auto pa = readAll(store_a), pb = readAll(store_b);
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(0, std::memcmp(pa[i].data(), pb[i].data(), pa[i].size() * 4))
        << store_a.all()[i]->name;
  EXPECT_NE(pa, initial);  // the steps did update
}

// The compiled optimizer updates every parameter in one dispatch (parameters in the store's
// page, gradients and moments in the executor's state buffer): the same bits as one update
// per parameter (the Texel variant asked for), with parameters - 1 fewer dispatches.
TEST_F(ExecutorTest, OneDispatchUpdatesEveryParameterWithTheSameBits) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  graph::OptimizerConfig many{graph::OptimizerConfig::Kind::AdamW, 1e-2f};
  many.max_grad_norm = 0.5f;
  graph::OptimizerConfig each = many;
  each.adamw.variant = ops::AdamWVariant::Texel;
  graph::ParameterStore store_a(ctx()), store_b(ctx());
  Classifier a, b;
  buildClassifier(a, store_a, 19, 7, {13, 9}, 5, ops::Activation::GeluTanh, &many);
  buildClassifier(b, store_b, 19, 7, {13, 9}, 5, ops::Activation::GeluTanh, &each);
  store_a.initialize(rng.seed());
  store_b.initialize(rng.seed());
  graph::Executor ea(ctx(), a.g), eb(ctx(), b.g);
  const std::vector<float> x = rng.normal(19 * 7);
  std::vector<uint32_t> y(19);
  for (auto& v : y) v = rng.below(5);
  ea.setInput(a.x, x), ea.setInput(a.y, y);
  eb.setInput(b.x, x), eb.setInput(b.y, y);
  const size_t params = store_a.all().size();
  ASSERT_EQ(params, 6u);
  // One many-tensor update against one per parameter; where the device binds fewer than the
  // many-tensor kernel's 5 storage buffers, that update is one per tensor as well (its ".sb4"
  // build also takes two passes per tensor): no fewer dispatches than the per-tensor graph.
  if (ctx().info().max_storage_buffers >= 5)
    EXPECT_EQ(ea.dispatchCount() + (params - 1), eb.dispatchCount());
  else
    EXPECT_GE(ea.dispatchCount(), eb.dispatchCount());
  const auto initial = readAll(store_a);
  for (int step = 0; step < 4; ++step) {
    ea.step();
    eb.step();
    EXPECT_EQ(bits(ea.readScalar(a.loss)), bits(eb.readScalar(b.loss))) << step;
  }
  const auto pa = readAll(store_a), pb = readAll(store_b);
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(0, std::memcmp(pa[i].data(), pb[i].data(), pa[i].size() * 4))
        << store_a.all()[i]->name;
  EXPECT_NE(pa, initial);
}

// The arena's reuse changes where tensors live, never what they hold: the same graph with
// every activation in its own range gives the same loss and gradients, bit for bit.
TEST_F(ExecutorTest, ArenaReuseGivesTheSameBitsAsSeparateBuffers) {
  Rng rng;
  graph::ParameterStore store(ctx());
  Classifier c;
  buildClassifier(c, store, 21, 7, {16, 16, 16}, 5, ops::Activation::Relu, nullptr);
  store.initialize(rng.seed());
  graph::Executor shared(ctx(), c.g), separate(ctx(), c.g, {.reuse_memory = false});
  EXPECT_LT(shared.arenaBytes(), separate.arenaBytes());
  EXPECT_EQ(separate.arenaBytes(), separate.naiveBytes());
  for (int64_t offset : shared.plan().offset)
    EXPECT_EQ(offset < 0 ? 0 : uint64_t(offset) % ctx().info().min_storage_offset_alignment, 0u);
  std::vector<uint32_t> y(21);
  for (auto& v : y) v = rng.below(5);
  const std::vector<float> x = rng.normal(21 * 7);
  std::vector<std::vector<float>> grads[2];
  float loss[2];
  int i = 0;
  for (graph::Executor* e : {&shared, &separate}) {
    e->setInput(c.x, x);
    e->setInput(c.y, y);
    e->step();
    loss[i] = e->readScalar(c.loss);
    for (const auto& [param, grad] : c.grads.parameters) grads[i].push_back(e->read(grad));
    ++i;
  }
  EXPECT_EQ(bits(loss[0]), bits(loss[1]));
  EXPECT_TRUE(std::isfinite(loss[0]));
  for (size_t k = 0; k < grads[0].size(); ++k)
    EXPECT_EQ(0, std::memcmp(grads[0][k].data(), grads[1][k].data(), grads[0][k].size() * 4));
}

// The learning rate lives in the device state buffer: writing 0 there freezes the
// parameters without re-recording; writing it back lets them move again.
TEST_F(ExecutorTest, LearningRateIsReadFromTheDeviceStateBuffer) {
  Rng rng;
  graph::OptimizerConfig sgd{graph::OptimizerConfig::Kind::Sgd, 0.1f};
  sgd.max_grad_norm = 1.0f;
  graph::ParameterStore store(ctx());
  Classifier c;
  buildClassifier(c, store, 8, 3, {6}, 2, ops::Activation::Tanh, &sgd);
  store.initialize(rng.seed());
  graph::Executor exec(ctx(), c.g);
  exec.setInput(c.x, rng.normal(24));
  exec.setInput(c.y, std::vector<uint32_t>{0, 1, 0, 1, 1, 0, 0, 1});
  const auto before = readAll(store);
  exec.setLearningRate(c.state, 0.0f);
  exec.step();
  EXPECT_EQ(readAll(store), before);
  exec.setLearningRate(c.state, 0.1f);
  exec.step();
  EXPECT_NE(readAll(store), before);
}

// 3-class spirals, 96 points, full batch: 2 -> 32 -> 32 -> 3 with GELU and AdamW. A linear
// model cannot go much below 1.0 here; the MLP gets under 0.1 in 300 steps (measured: ~0.01).
TEST_F(ExecutorTest, MlpLearnsSpirals) {
  Rng rng;
  std::vector<float> x;
  std::vector<uint32_t> y;
  spirals(rng, 32, x, y);
  graph::OptimizerConfig adamw{graph::OptimizerConfig::Kind::AdamW, 2e-2f};
  adamw.adamw.weight_decay = 0.0f;
  graph::ParameterStore store(ctx());
  Classifier c;
  buildClassifier(c, store, 96, 2, {32, 32}, 3, ops::Activation::GeluTanh, &adamw);
  store.initialize(rng.seed());
  graph::Executor exec(ctx(), c.g);
  exec.setInput(c.x, x);
  exec.setInput(c.y, y);
  exec.step();
  const float first = exec.readScalar(c.loss);
  const auto start = std::chrono::steady_clock::now();
  const int steps = 300;
  for (int s = 1; s < steps; ++s) exec.step();  // no readback in between
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const float last = exec.readScalar(c.loss);
  std::printf(
      "spirals: loss %.4f -> %.4f after %d steps, %.3f ms per step, %u dispatches, "
      "%u barriers per step\n",
      double(first), double(last), steps, ms / (steps - 1), exec.dispatchCount(),
      exec.barrierCount());
  EXPECT_GT(first, 0.9f) << rng.describe();
  EXPECT_LT(last, 0.1f) << rng.describe();
}

TEST_F(ExecutorTest, SgdMomentumLearnsALinearlySeparableSet) {
  Rng rng;
  const int n = 64;
  std::vector<float> x = rng.uniform(size_t(n) * 4);
  std::vector<uint32_t> y(n);
  for (int i = 0; i < n; ++i) y[size_t(i)] = x[size_t(4 * i)] + 0.5f * x[size_t(4 * i + 1)] > 0;
  graph::OptimizerConfig sgd{graph::OptimizerConfig::Kind::Sgd, 0.2f};
  graph::ParameterStore store(ctx());
  Classifier c;
  buildClassifier(c, store, n, 4, {8}, 2, ops::Activation::Relu, &sgd);
  store.initialize(rng.seed());
  graph::Executor exec(ctx(), c.g);
  exec.setInput(c.x, x);
  exec.setInput(c.y, y);
  for (int s = 0; s < 150; ++s) exec.step();
  EXPECT_LT(exec.readScalar(c.loss), 0.2f) << rng.describe();
}

TEST_F(ExecutorTest, ReadsOnlyWhatIsKeptAndChecksInputs) {
  graph::ParameterStore store(ctx());
  Graph g;
  const Tensor x = g.input("x", {4, 3});
  const Tensor w = g.parameter(store.add("w", {3, 2}, Init::ones()));
  const Tensor hidden = g.relu(g.matmul(x, w));
  const Tensor out = g.add(hidden, g.constant("c", {2}, {1.0f, -1.0f}));
  g.markOutput(out);
  store.initialize(1);
  graph::Executor exec(ctx(), g);
  exec.setInput(x, std::vector<float>{1, 2, 3, -1, -2, -3, 0, 0, 1, 0.5f, 0.5f, 0.5f});
  exec.step();
  EXPECT_EQ(exec.read(out), (std::vector<float>{7, 5, 1, -1, 2, 0, 2.5f, 0.5f}));
  EXPECT_EQ(exec.read(w), std::vector<float>(6, 1.0f));
  EXPECT_THROW(exec.read(hidden), Error);  // its bytes may be reused
  EXPECT_THROW(exec.setInput(x, std::vector<float>(11)), ShapeError);
  EXPECT_THROW(exec.setInput(x, std::vector<uint32_t>(12)), ShapeError);
  EXPECT_THROW(exec.setInput(w, std::vector<float>(6)), Error);
}

// Rows of f32 and u32 datasets picked on the device by an index buffer, repeats included;
// u32 words (labels) keep their bits, even those that are NaN or denormal as floats. An id
// past the table gives a zero row and sets the gather's status flags.
TEST_F(ExecutorTest, GatherPicksDatasetRowsOnTheDevice) {
  Rng rng;
  const std::vector<float> features = rng.normal(7 * 3 * 2);
  const std::vector<uint32_t> labels{0, 1, 2, 0x7f800001u, 0xffffffffu, 0x00000007u, 0x80000000u};
  const graph::Dataset x = graph::uploadDataset(ctx(), "x", {7, 3, 2}, features);
  const graph::Dataset y = graph::uploadDataset(ctx(), "y", {7}, labels);
  Graph g;
  const Tensor ids = g.input("ids", {6}, ops::DType::U32);
  const Tensor rows = g.gather(g.dataset(x), ids), picked = g.gather(g.dataset(y), ids);
  g.markOutput(rows);
  g.markOutput(picked);
  const int status = g.nodes()[size_t(g.producer(rows.id))].inputs[2];
  graph::Executor exec(ctx(), g);
  const std::vector<uint32_t> batch{6, 3, 3, 0, 4, 5};
  exec.setInput(ids, batch);
  exec.step();
  const std::vector<float> got = exec.read(rows), got_labels = exec.read(picked);
  for (size_t i = 0; i < batch.size(); ++i) {
    for (size_t k = 0; k < 6; ++k)
      EXPECT_EQ(bits(got[i * 6 + k]), bits(features[batch[i] * 6 + k])) << i << "," << k;
    EXPECT_EQ(bits(got_labels[i]), labels[batch[i]]) << i;
  }
  EXPECT_EQ(exec.read(Tensor{status}), std::vector<float>(2, 0.0f));

  exec.setInput(ids, std::vector<uint32_t>{1, 9, 2, 2, 2, 2});
  exec.step();
  const std::vector<float> bad = exec.read(rows);
  for (size_t k = 0; k < 6; ++k) EXPECT_EQ(bad[6 + k], 0.0f);
  const std::vector<float> flags = exec.read(Tensor{status});
  EXPECT_EQ(bits(flags[0]), ops::kGatherBadId);
  EXPECT_EQ(bits(flags[1]), 9u);

  // A slice of the ids 4 bytes in: the embedding kernels bind any 4-byte offset.
  Graph offset;
  const Tensor all_ids = offset.input("ids", {6}, ops::DType::U32);
  const Tensor sliced_rows = offset.gather(offset.dataset(x), offset.slice(all_ids, 1, 4));
  offset.markOutput(sliced_rows);
  graph::Executor sliced(ctx(), offset);
  sliced.setInput(all_ids, std::vector<uint32_t>{9, 4, 0, 3, 9, 9});
  sliced.step();
  const std::vector<float> from_slice = sliced.read(sliced_rows);
  const uint32_t want_rows[] = {4, 0, 3};
  for (size_t i = 0; i < 3; ++i)
    for (size_t k = 0; k < 6; ++k)
      EXPECT_EQ(bits(from_slice[i * 6 + k]), bits(features[want_rows[i] * 6 + k])) << i << "," << k;
}

// A windows dataset stores its stream once and serves every window as a row: gathered rows
// equal the windows cut on the host, the last window included; a row past it is flagged; the
// dataset cannot feed anything but a gather; a stream shorter than one window is an error.
TEST_F(ExecutorTest, WindowsDatasetServesEveryWindowOfItsStream) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t length = 517, window = 13, count = length - window + 1;
  std::vector<uint32_t> stream(length);
  for (auto& t : stream) t = rng.below(1u << 31);
  const graph::Dataset windows = graph::uploadWindows(ctx(), "windows", stream, window);
  EXPECT_EQ(windows.shape, (ops::Shape{count, window}));
  EXPECT_EQ(windows.buffer->size(), uint64_t(length) * 4);  // the stream, not count * window
  Graph g;
  const Tensor ids = g.input("ids", {9}, ops::DType::U32);
  const Tensor rows = g.gather(g.dataset(windows), ids);
  g.markOutput(rows);
  const int status = g.nodes()[size_t(g.producer(rows.id))].inputs[2];
  graph::Executor exec(ctx(), g);
  std::vector<uint32_t> batch(9);
  for (auto& b : batch) b = rng.below(uint32_t(count));
  batch[0] = uint32_t(count - 1);
  batch[1] = 0;
  exec.setInput(ids, batch);
  exec.step();
  const std::vector<uint32_t> got = exec.readWords(rows);
  for (size_t i = 0; i < batch.size(); ++i)
    for (int64_t k = 0; k < window; ++k)
      ASSERT_EQ(got[i * window + size_t(k)], stream[batch[i] + size_t(k)]) << i << "," << k;
  EXPECT_EQ(exec.readWords(Tensor{status}), (std::vector<uint32_t>{0, 0}));

  batch[4] = uint32_t(count);  // one window too far: its row would end past the stream
  exec.setInput(ids, batch);
  exec.step();
  EXPECT_EQ(exec.readWords(Tensor{status}),
            (std::vector<uint32_t>{ops::kGatherBadId, uint32_t(count)}));
  for (int64_t k = 0; k < window; ++k) EXPECT_EQ(exec.readWords(rows)[4 * window + k], 0u);

  Graph misuse;
  const Tensor w = misuse.dataset(windows);
  EXPECT_THROW(misuse.reshape(w, {count * window}), Error);
  EXPECT_THROW(graph::uploadWindows(ctx(), "short", std::vector<uint32_t>(12, 1u), 13), ShapeError);
}

// First-axis slices cost no kernel: slicing an input and an activation adds no dispatch, and
// each slice reads the right rows, at byte offsets (12, 24) no binding alignment divides.
TEST_F(ExecutorTest, SlicesAreViewsWithoutKernels) {
  Rng rng;
  const std::vector<float> xs = rng.normal(7 * 3);
  Graph g_full, g_sliced;
  const Tensor x_full = g_full.input("x", {7, 3}), x = g_sliced.input("x", {7, 3});
  g_full.markOutput(g_full.add(g_full.relu(x_full), g_full.constant("c", {3}, {1, 2, 3})));
  const Tensor h = g_sliced.relu(g_sliced.slice(x, 1, 4));  // x rows 1..3
  const Tensor out = g_sliced.add(g_sliced.slice(h, 2, 3), g_sliced.constant("c", {3}, {1, 2, 3}));
  const Tensor tail = g_sliced.slice(x, 5, 7);
  g_sliced.markOutput(out);
  graph::Executor full(ctx(), g_full), sliced(ctx(), g_sliced);
  EXPECT_EQ(sliced.dispatchCount(), full.dispatchCount());
  EXPECT_EQ(sliced.view(tail).offset, sliced.view(x).offset + 5 * 3 * 4);
  sliced.setInput(x, xs);
  sliced.step();
  const std::vector<float> got = sliced.read(out);
  ASSERT_EQ(got.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_EQ(got[k], std::max(xs[3 * 3 + k], 0.0f) + float(k + 1));
  EXPECT_EQ(sliced.read(tail), std::vector<float>(xs.begin() + 15, xs.end()));  // persistent root
}

// Under a 16 MiB limit, with 1 MiB of parameters and 2 MiB of data resident, a graph whose
// activations need 16 MiB fails to compile with an OutOfMemoryError that says what the memory
// holds, leaves nothing allocated, and a graph that fits compiles and computes x·W after it.
TEST(ExecutorOutOfMemory, SaysWhatTheMemoryHoldsAndTheContextGoesOn) {
  vk::ContextOptions options;
  options.validation = true;
  options.memory_limit = VkDeviceSize(16) << 20;
  vk::Context context(options);
  Rng rng;
  SCOPED_TRACE(rng.describe());
  graph::ParameterStore store(context);
  store.add("w", {512, 512}, Init::xavierUniform());
  store.initialize(rng.seed());
  const graph::Dataset data =
      graph::uploadDataset(context, "x", {1024, 512}, rng.uniform(1024 * 512));
  auto build = [&](Graph& g, int64_t rows) {
    const Tensor x = g.input("x", {rows, 512});
    g.markOutput(g.matmul(x, g.parameter(store.at("w"))));
    return x;
  };
  const VkDeviceSize before = context.allocator().bytesInUse();
  Graph big;
  build(big, 8192);  // a (8192, 512) output: 16 MiB
  try {
    graph::Executor exec(context, big);
    ADD_FAILURE() << "a 16 MiB arena fitted beside 3 MiB under a 16 MiB limit";
  } catch (const OutOfMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("parameters 1 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("datasets 2 MiB"), std::string::npos) << what;
    EXPECT_NE(what.find("of the 16 MiB memory limit"), std::string::npos) << what;
  }
  EXPECT_EQ(context.allocator().bytesInUse(), before);

  Graph small;
  const Tensor x = build(small, 33);
  graph::Executor exec(context, small);
  const std::vector<float> xs = rng.uniform(33 * 512);
  exec.setInput(x, xs);
  exec.step();
  const std::vector<float> y = exec.read(Tensor{small.outputs().at(0)});
  const std::vector<uint32_t> w = store.download().at(0).data;
  double worst = 0;
  for (int r = 0; r < 33; ++r)
    for (int c = 0; c < 512; ++c) {
      double want = 0;
      for (int k = 0; k < 512; ++k) {
        float wk;
        std::memcpy(&wk, &w[size_t(k) * 512 + size_t(c)], 4);
        want += double(xs[size_t(r) * 512 + size_t(k)]) * double(wk);
      }
      worst = std::max(worst, std::abs(want - double(y[size_t(r) * 512 + size_t(c)])));
    }
  EXPECT_LT(worst, 1e-4);  // 512-term sums of products below 1 in size
  EXPECT_GT(context.allocator().bytesInUse(vk::Use::Activations), 0u);
  EXPECT_TRUE(context.validationMessages().empty());
}

// After the device is lost (here by markLost, the drill for VK_ERROR_DEVICE_LOST), every
// submission and allocation is refused with DeviceLostError naming the first loss, and the
// Context and what was built on it are still destroyed cleanly.
TEST(DeviceLost, TheContextRefusesWorkAfterwards) {
  vk::ContextOptions options;
  options.validation = true;
  vk::Context context(options);
  Rng rng;
  Graph g;
  const Tensor x = g.input("x", {3, 5});
  g.markOutput(g.gelu(x));
  graph::Executor exec(context, g);
  exec.setInput(x, rng.uniform(15));
  exec.step();
  EXPECT_FALSE(context.lost());
  context.markLost("drill: the GPU was reset");
  EXPECT_TRUE(context.lost());
  auto expectRefused = [&](const std::function<void()>& work, const char* what) {
    try {
      work();
      ADD_FAILURE() << what << " ran on a lost device";
    } catch (const DeviceLostError& e) {
      EXPECT_EQ(e.result(), VK_ERROR_DEVICE_LOST);
      EXPECT_NE(std::string(e.what()).find("lost earlier (drill: the GPU was reset)"),
                std::string::npos)
          << e.what();
    }
  };
  expectRefused([&] { exec.step(); }, "a graph step");
  expectRefused([&] { exec.setInput(x, rng.uniform(15)); }, "an upload");
  expectRefused([&] { (void)exec.read(Tensor{g.outputs().at(0)}); }, "a download");
  expectRefused([&] { (void)context.allocator().allocate(64); }, "an allocation");
  expectRefused([&] { context.waitIdle(); }, "a wait");
  EXPECT_TRUE(context.validationMessages().empty());
}

}  // namespace
}  // namespace vkgrad::test
