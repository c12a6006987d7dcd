// Submitting without waiting (Executor::submit, Trainer::stepAsync), the engine's timeline
// semaphore, the app's semaphores, and the engine tensors an app may read in place
// (Executor::buffer): what an app that shares its device with the engine relies on.
#include <volk.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "common/device_tensor.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"
#include "vkgrad/training/optimizer.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::Tensor;

// x (17, 5) -> 11 -> 4 classes with AdamW: a step that changes every parameter.
struct Mlp {
  Graph g;
  Tensor x, y, w0, hidden, loss;
  explicit Mlp(graph::ParameterStore& store) {
    x = g.input("x", {17, 5});
    y = g.input("y", {17}, ops::DType::U32);
    w0 = g.parameter(store.add("w0", {5, 11}, Init::xavierUniform()));
    const Tensor b0 = g.parameter(store.add("b0", {11}, Init::uniform(-0.5f, 0.5f)));
    const Tensor w1 = g.parameter(store.add("w1", {11, 4}, Init::xavierUniform()));
    hidden = g.gelu(g.matmul(x, w0, b0));
    loss = g.crossEntropy(g.matmul(hidden, w1), y);
    g.markOutput(loss);
    graph::addOptimizer(g, graph::backward(g, loss), {graph::OptimizerConfig::Kind::AdamW, 1e-2f});
  }
};

std::vector<std::vector<float>> parameters(const graph::ParameterStore& store) {
  std::vector<std::vector<float>> out;
  for (const auto& p : store.all()) out.push_back(download(sharedContext(), p->view()));
  return out;
}

class AsyncTest : public VkTest {
 protected:
  // A timeline semaphore of the "app", at `initial`.
  static VkSemaphore timeline(uint64_t initial) {
    VkSemaphoreTypeCreateInfo type{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
    type.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
    type.initialValue = initial;
    VkSemaphoreCreateInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
    info.pNext = &type;
    VkSemaphore s = VK_NULL_HANDLE;
    EXPECT_EQ(ctx().vk().vkCreateSemaphore(ctx().device(), &info, nullptr, &s), VK_SUCCESS);
    return s;
  }
  static uint64_t counter(VkSemaphore s) {
    uint64_t value = 0;
    EXPECT_EQ(ctx().vk().vkGetSemaphoreCounterValue(ctx().device(), s, &value), VK_SUCCESS);
    return value;
  }
  static void destroy(VkSemaphore s) { ctx().vk().vkDestroySemaphore(ctx().device(), s, nullptr); }
  static void signal(VkSemaphore s, uint64_t value) {  // from the host, as an app's upload would
    VkSemaphoreSignalInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_SIGNAL_INFO};
    info.semaphore = s;
    info.value = value;
    ASSERT_EQ(ctx().vk().vkSignalSemaphore(ctx().device(), &info), VK_SUCCESS);
  }
  // Random inputs and labels for one step of m.
  static void feed(graph::Executor& exec, const Mlp& m, Rng& rng) {
    exec.setInput(m.x, rng.normal(17 * 5));
    std::vector<uint32_t> y(17);
    for (auto& v : y) v = rng.below(4);
    exec.setInput(m.y, y);
  }
};

// Four submissions back to back (each waits for the one before inside submit) leave the same
// bits as four step() calls; the values count up on the Context's timeline.
TEST_F(AsyncTest, SubmittedStepsGiveTheBitsOfWaitedSteps) {
  Rng rng;
  graph::ParameterStore store_a(ctx()), store_b(ctx());
  Mlp a(store_a), b(store_b);
  store_a.initialize(rng.seed());
  store_b.initialize(rng.seed());
  graph::Executor waited(ctx(), a.g), submitted(ctx(), b.g);
  const std::vector<float> x = rng.normal(17 * 5);
  std::vector<uint32_t> y(17);
  for (auto& v : y) v = rng.below(4);
  waited.setInput(a.x, x);
  waited.setInput(a.y, y);
  submitted.setInput(b.x, x);
  submitted.setInput(b.y, y);
  uint64_t last = ctx().submitted();
  for (int step = 0; step < 4; ++step) {
    waited.step();
    const uint64_t value = submitted.submit();
    EXPECT_GT(value, last);
    EXPECT_EQ(value, ctx().submitted());
    last = value;
  }
  EXPECT_EQ(waited.readScalar(a.loss), submitted.readScalar(b.loss));  // read waits for it
  submitted.wait();
  EXPECT_FALSE(submitted.busy());
  EXPECT_TRUE(ctx().finished(last));
  const auto pa = parameters(store_a), pb = parameters(store_b);
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(0, std::memcmp(pa[i].data(), pb[i].data(), pa[i].size() * 4)) << i;
  EXPECT_THROW(ctx().wait(ctx().submitted() + 1), Error);  // a value never submitted
}

// A step recorded in pieces (Executor::slice, sliceByCost, sliceByTime) and submitted one piece at
// a time, as a frame loop would, leaves the bits of the whole step; so does step() over the pieces.
// Every piece waits for nothing it does not need: the app's semaphores go to the first
// piece (waits) and the last (signals) only.
TEST_F(AsyncTest, SlicedStepsGiveTheBitsOfWholeSteps) {
  Rng rng;
  graph::ParameterStore store_a(ctx()), store_b(ctx()), store_c(ctx());
  Mlp a(store_a), b(store_b), c(store_c);
  for (auto* s : {&store_a, &store_b, &store_c}) s->initialize(rng.seed());
  graph::Executor whole(ctx(), a.g), sliced(ctx(), b.g);
  graph::CompileOptions profiled;
  profiled.profile = true;
  graph::Executor timed(ctx(), c.g, profiled);
  const uint32_t dispatches = whole.dispatchCount();
  sliced.slice(2);
  EXPECT_GT(sliced.pieces(), 3);
  EXPECT_EQ(sliced.dispatchCount(), dispatches);  // the same work, in more command buffers
  EXPECT_THROW(whole.sliceByTime(1.0), Error);    // no node times without profiling
  for (int step = 0; step < 4; ++step) {
    const std::vector<float> x = rng.normal(17 * 5);
    std::vector<uint32_t> y(17);
    for (auto& v : y) v = rng.below(4);
    for (auto [exec, m] : {std::pair{&whole, &a}, std::pair{&sliced, &b}, std::pair{&timed, &c}}) {
      exec->setInput(m->x, x);
      exec->setInput(m->y, y);
    }
    whole.step();
    int frames = 0;
    while (true) {
      ++frames;
      EXPECT_EQ(sliced.nextPiece(), frames - 1);
      if (sliced.submitPiece()) break;
    }
    EXPECT_EQ(frames, sliced.pieces());
    EXPECT_EQ(sliced.nextPiece(), 0);
    sliced.wait();
    timed.step();
    if (step == 0) {
      // Pieces by the step's own node times: how many depends on the timing (one node may
      // take over a third of a step under load), so only that it slices. Then by fixed costs,
      // which give a known split: 1 per launched node within 3 is slice(3)'s.
      ASSERT_GT(timed.gpuMilliseconds(), 0.0) << "the device's queue has no timestamps";
      EXPECT_GE(timed.sliceByTime(timed.gpuMilliseconds() / 3), 1);
      std::vector<graph::NodeTime> unit;
      for (size_t n = 0; n < c.g.nodes().size(); ++n)
        if (c.g.nodes()[n].def().launch) unit.push_back({int(n), 1.0});
      timed.slice(3);
      const int by_count = timed.pieces();
      EXPECT_GT(by_count, 3);
      EXPECT_EQ(timed.sliceByCost(unit, 3.0), by_count);
      EXPECT_THROW(timed.sliceByCost(unit, 0.0), Error);
    }
    EXPECT_EQ(whole.readScalar(a.loss), sliced.readScalar(b.loss)) << step;
    EXPECT_EQ(whole.readScalar(a.loss), timed.readScalar(c.loss)) << step;
  }
  const auto pa = parameters(store_a), pb = parameters(store_b), pc = parameters(store_c);
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(pa[i].data(), pb[i].data(), pa[i].size() * 4)) << i;
    EXPECT_EQ(0, std::memcmp(pa[i].data(), pc[i].data(), pa[i].size() * 4)) << i;
  }
  // Back to one piece: the same recording as never sliced.
  sliced.slice(0);
  EXPECT_EQ(sliced.pieces(), 1);
  EXPECT_TRUE(sliced.submitPiece());
  sliced.wait();
}

// The engine's step waits on the device for the app's timeline semaphore, and signals the
// app's semaphore when it finishes.
TEST_F(AsyncTest, WaitsForAndSignalsTheAppsSemaphores) {
  Rng rng;
  graph::ParameterStore store(ctx());
  Mlp m(store);
  store.initialize(rng.seed());
  graph::Executor exec(ctx(), m.g);
  feed(exec, m, rng);
  const VkSemaphore app_upload = timeline(0), app_render = timeline(3);
  const vk::SemaphoreWait wait{app_upload, 1, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT};
  const vk::SemaphoreSignal render_signal{app_render, 7};
  const uint64_t value = exec.submit({&wait, 1}, {&render_signal, 1});
  // Nothing can run before the app signals: the step is still pending after a while.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(exec.busy());
  EXPECT_FALSE(ctx().finished(value));
  EXPECT_EQ(counter(app_render), 3u);
  signal(app_upload, 1);
  exec.wait();
  EXPECT_FALSE(exec.busy());
  // Signals of one submission are not ordered among themselves: wait for the app's too.
  VkSemaphoreWaitInfo rendered{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  const uint64_t seven = 7;
  rendered.semaphoreCount = 1;
  rendered.pSemaphores = &app_render;
  rendered.pValues = &seven;
  EXPECT_EQ(ctx().vk().vkWaitSemaphores(ctx().device(), &rendered, 10'000'000'000ull), VK_SUCCESS);
  EXPECT_EQ(counter(app_render), 7u);
  EXPECT_TRUE(std::isfinite(exec.readScalar(m.loss)));
  destroy(app_upload);
  destroy(app_render);
}

// Setting the next step's input while a step waits on the device (for the app's semaphore)
// returns at once: the copy is queued behind the step, not waited for. The result is that of
// the same steps run one after the other.
TEST_F(AsyncTest, InputsUploadWithoutWaitingForAPendingStep) {
  Rng rng;
  graph::ParameterStore store(ctx()), twin_store(ctx());
  Mlp m(store), twin(twin_store);
  const uint64_t seed = rng.seed();
  store.initialize(seed);
  twin_store.initialize(seed);
  graph::Executor exec(ctx(), m.g), reference(ctx(), twin.g);
  const std::vector<float> x1 = rng.normal(17 * 5), x2 = rng.normal(17 * 5);
  std::vector<uint32_t> y(17);
  for (auto& v : y) v = rng.below(4);
  exec.setInput(m.x, x1);
  exec.setInput(m.y, y);
  const VkSemaphore app_upload = timeline(0);
  const vk::SemaphoreWait wait{app_upload, 1, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT};
  exec.submit({&wait, 1}, {});
  // On another thread, so that a regression fails here instead of hanging the test; this
  // thread only waits (the Context is used by one thread at a time).
  std::future<void> upload = std::async(std::launch::async, [&] { exec.setInput(m.x, x2); });
  const bool returned = upload.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  EXPECT_TRUE(exec.busy());
  signal(app_upload, 1);
  upload.get();
  EXPECT_TRUE(returned) << "setInput waited for the step pending on the app's semaphore";
  exec.step();
  reference.setInput(twin.x, x1);
  reference.setInput(twin.y, y);
  reference.step();
  reference.setInput(twin.x, x2);
  reference.step();
  EXPECT_EQ(exec.readScalar(m.loss), reference.readScalar(twin.loss));
  destroy(app_upload);
}

// A step whose learning rate changes every step uploads two small things before it submits
// (its batch and its rate). Neither waits for the queue, even while the queue is blocked
// behind an app's semaphore (Staging's ring: one buffer would make the rate's upload wait
// for the batch's copy, queued behind the blocked work). The steps give the bits of the same
// steps unblocked.
TEST_F(AsyncTest, AScheduledStepAsyncReturnsWhileTheQueueIsBlocked) {
  Rng rng;
  const int n = 40;
  const std::vector<float> x = rng.normal(size_t(n) * 3);
  std::vector<uint32_t> y(n);
  for (auto& v : y) v = rng.below(3);
  const graph::Dataset dx = graph::uploadDataset(ctx(), "x", {n, 3}, x);
  const graph::Dataset dy = graph::uploadDataset(ctx(), "y", {n}, y);
  const uint64_t seed = rng.seed();
  auto batch = [&](int step) {
    std::vector<uint32_t> rows(9);
    for (int i = 0; i < 9; ++i) rows[size_t(i)] = uint32_t((step * 9 + i * 7) % n);
    return rows;
  };
  std::vector<std::vector<float>> after[2];
  for (int blocked = 0; blocked < 2; ++blocked) {
    graph::ParameterStore store(ctx()), other_store(ctx());
    store.add("w", {3, 7}, Init::xavierUniform());
    store.add("v", {7, 3}, Init::xavierUniform());
    store.initialize(seed);
    Mlp other(other_store);
    other_store.initialize(seed);
    graph::Executor app_work(ctx(), other.g);
    feed(app_work, other, rng);
    auto model = [&](Graph& g, std::span<const Tensor> rows) {
      const Tensor h = g.gelu(g.matmul(rows[0], g.parameter(store.at("w"))));
      return g.crossEntropy(g.matmul(h, g.parameter(store.at("v"))), rows[1]);
    };
    graph::TrainerOptions options;
    options.batch = 9;
    options.schedule = graph::Schedule::linearWarmup(0.05f, 10);  // a new rate every step
    graph::Trainer trainer(ctx(), store, {&dx, &dy}, model, options);
    for (int step = 0; step < 2; ++step) trainer.stepAsync(batch(step));
    trainer.lastLoss();  // the trainer is idle: only the app's work can hold the queue
    const VkSemaphore gate = timeline(0);
    const vk::SemaphoreWait wait{gate, 1, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT};
    if (blocked) app_work.submit({&wait, 1}, {});  // nothing queued after it runs until signal
    const float rate = trainer.learningRate();
    std::future<void> step = std::async(std::launch::async, [&] { trainer.stepAsync(batch(2)); });
    const bool returned = step.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    if (blocked) {
      EXPECT_TRUE(app_work.busy());
      signal(gate, 1);
    }
    step.get();
    EXPECT_TRUE(returned) << "stepAsync waited for the queue";
    EXPECT_NE(trainer.learningRate(), rate);  // the next step's rate differs again
    trainer.lastLoss();
    app_work.wait();
    destroy(gate);
    after[blocked] = parameters(store);
  }
  EXPECT_EQ(after[0], after[1]);
}

// Executor::buffer names the bytes read() returns: a copy the app records from that range
// holds the tensor. Tensors the executor does not keep are refused, as by read().
TEST_F(AsyncTest, BufferRangeHoldsTheTensor) {
  Rng rng;
  graph::ParameterStore store(ctx());
  Mlp m(store);
  store.initialize(rng.seed());
  graph::Executor exec(ctx(), m.g);
  feed(exec, m, rng);
  exec.submit();
  const vk::BufferRange w0 = exec.buffer(m.w0);
  ASSERT_NE(w0.buffer, VK_NULL_HANDLE);
  EXPECT_EQ(w0.bytes, 5u * 11u * 4u);
  EXPECT_THROW(exec.buffer(m.hidden), Error);

  const VolkDeviceTable& vk = ctx().vk();
  vk::Buffer copy = ctx().allocator().allocate(w0.bytes);
  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.queueFamilyIndex = ctx().queueFamily();
  VkCommandPool pool = VK_NULL_HANDLE;
  ASSERT_EQ(vk.vkCreateCommandPool(ctx().device(), &pool_info, nullptr, &pool), VK_SUCCESS);
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = pool;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd = VK_NULL_HANDLE;
  ASSERT_EQ(vk.vkAllocateCommandBuffers(ctx().device(), &alloc, &cmd), VK_SUCCESS);
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  ASSERT_EQ(vk.vkBeginCommandBuffer(cmd, &begin), VK_SUCCESS);
  // The app's side of the contract: its reads come after the engine's writes.
  VkMemoryBarrier barrier{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  barrier.srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
  barrier.dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT;
  vk.vkCmdPipelineBarrier(cmd,
                          VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                          VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &barrier, 0, nullptr, 0, nullptr);
  const VkBufferCopy region{w0.offset, copy.offset(), w0.bytes};
  vk.vkCmdCopyBuffer(cmd, w0.buffer, copy.handle(), 1, &region);
  ASSERT_EQ(vk.vkEndCommandBuffer(cmd), VK_SUCCESS);
  ctx().submitAndWait(cmd);
  vk.vkDestroyCommandPool(ctx().device(), pool, nullptr);
  const std::vector<float> expected = exec.read(m.w0);
  const std::vector<float> got = download(ctx(), ops::view(copy, {5, 11}));
  EXPECT_EQ(got, expected);
}

// Trainer::stepAsync is step() without the wait: the same parameters after the same steps,
// and lastLoss() is the loss step() reads.
TEST_F(AsyncTest, TrainerStepAsyncMatchesStep) {
  Rng rng;
  const int n = 40;
  std::vector<float> x = rng.normal(size_t(n) * 3);
  std::vector<uint32_t> y(n);
  for (auto& v : y) v = rng.below(3);
  const graph::Dataset dx = graph::uploadDataset(ctx(), "x", {n, 3}, x);
  const graph::Dataset dy = graph::uploadDataset(ctx(), "y", {n}, y);
  const uint64_t seed = rng.seed();
  std::vector<std::vector<float>> after[2];
  float loss[2] = {0, 0};
  for (int mode = 0; mode < 2; ++mode) {
    graph::ParameterStore store(ctx());
    store.add("w", {3, 7}, Init::xavierUniform());
    store.add("v", {7, 3}, Init::xavierUniform());
    store.initialize(seed);
    auto model = [&](Graph& g, std::span<const Tensor> batch) {
      const Tensor h = g.gelu(g.matmul(batch[0], g.parameter(store.at("w"))));
      return g.crossEntropy(g.matmul(h, g.parameter(store.at("v"))), batch[1]);
    };
    graph::TrainerOptions options;
    options.batch = 9;
    options.schedule = graph::Schedule::constant(0.02f);
    graph::Trainer trainer(ctx(), store, {&dx, &dy}, model, options);
    for (int step = 0; step < 5; ++step) {
      std::vector<uint32_t> batch(9);
      for (int i = 0; i < 9; ++i) batch[size_t(i)] = uint32_t((step * 9 + i * 7) % n);
      if (mode == 0) {
        loss[0] = *trainer.step(batch, true);
      } else {
        trainer.stepAsync(batch);
      }
    }
    if (mode == 1) loss[1] = trainer.lastLoss();
    EXPECT_FALSE(trainer.busy());
    EXPECT_EQ(trainer.steps(), 5);
    after[mode] = parameters(store);
  }
  EXPECT_EQ(loss[0], loss[1]);
  EXPECT_EQ(after[0], after[1]);
}

}  // namespace
}  // namespace vkgrad::test
