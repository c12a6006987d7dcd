// The threading contract (README, "Threads"): a Context and everything made from it are used
// by one thread at a time, any thread, and Contexts share nothing mutable, so each thread may
// drive its own. Checked here by results, and by ThreadSanitizer when the suite is built with
// -DVKGRAD_SANITIZE=thread (scripts/test-threads.sh).
#include <future>
#include <thread>
#include <vector>

#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::test {
namespace {

// A Context of its own, with the validation layer on (as the shared one).
std::unique_ptr<vk::Context> ownContext() {
  vk::ContextOptions options;
  options.validation = true;
  return std::make_unique<vk::Context>(options);
}

// What a run leaves: every loss and every parameter's bits.
struct TrainedBits {
  std::vector<float> losses;
  std::vector<std::vector<uint32_t>> parameters;
  bool operator==(const TrainedBits&) const = default;
};

// Six steps of a small GPT (attention, layer norm, dropout, AdamW) on a fixed token stream.
TrainedBits trainGpt(vk::Context& context, uint64_t seed) {
  gpt::GptConfig config;
  config.vocab = 13;
  config.layers = 2;
  config.heads = 2;
  config.width = 16;
  config.context = 8;
  config.dropout = 0.1f;
  graph::ParameterStore store(context);
  gpt::declareGpt(store, config);
  store.initialize(seed);
  std::vector<uint32_t> tokens(200);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = uint32_t((i * 7 + i / 5) % 13);
  const gpt::TokenWindows windows = gpt::uploadTokenWindows(context, tokens, config.context);
  graph::TrainerOptions options;
  options.batch = 4;
  options.schedule = graph::Schedule::linearWarmup(3e-3f, 4);
  graph::Trainer trainer(context, store, {&windows.ids, &windows.targets},
                         gpt::gptLossFn(store, config), options);
  TrainedBits run;
  for (uint32_t step = 0; step < 6; ++step) {
    const std::vector<uint32_t> rows{step, 40 + step, 90 + 3 * step, 150 - step};
    run.losses.push_back(*trainer.step(rows, true));
  }
  for (const graph::SavedTensor& t : store.download()) run.parameters.push_back(t.data);
  return run;
}

void expectNoValidationMessages(const vk::Context& context, const char* which) {
  for (const std::string& m : context.validationMessages())
    ADD_FAILURE() << which << ": validation message: " << m;
}

// Two Contexts, each trained on its own thread at the same time, give the bits each gives
// alone on the main thread.
TEST(ThreadsTest, TwoContextsOnTwoThreadsTrainTheBitsTheyTrainAlone) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const uint64_t seeds[2] = {rng.seed(), rng.seed() + 1};
  TrainedBits alone[2];
  for (int i = 0; i < 2; ++i) {
    auto context = ownContext();
    alone[i] = trainGpt(*context, seeds[i]);
    expectNoValidationMessages(*context, "alone");
  }
  ASSERT_NE(alone[0], alone[1]);  // different seeds: a mix-up between the threads would show
  TrainedBits together[2];
  std::vector<std::string> messages[2];
  std::thread threads[2];
  for (int i = 0; i < 2; ++i)
    threads[i] = std::thread([&, i] {
      auto context = ownContext();
      together[i] = trainGpt(*context, seeds[i]);
      messages[i] = context->validationMessages();
    });
  for (std::thread& t : threads) t.join();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(together[i], alone[i]) << "context " << i;
    for (const std::string& m : messages[i]) ADD_FAILURE() << "validation message: " << m;
  }
}

// A Context is not tied to the thread that made it: built on the main thread, driven by a
// worker while the main thread runs its own work on another Context (another device queue, as
// an app's renderer would), and destroyed back on the main thread. Both give their bits.
TEST(ThreadsTest, AContextDrivenFromAWorkerBesideTheMainThreadsOwnQueue) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const uint64_t seed = rng.seed();
  TrainedBits alone;
  {
    auto context = ownContext();
    alone = trainGpt(*context, seed);
  }
  auto worker_context = ownContext();
  auto app_context = ownContext();
  // The main thread's work: a forward pass it checks on every repetition.
  graph::Graph g;
  const graph::Tensor x = g.input("x", {33, 7});
  graph::ParameterStore app_store(*app_context);
  const graph::Tensor w = g.parameter(app_store.add("w", {7, 5}, graph::Init::xavierUniform()));
  app_store.initialize(seed);
  const graph::Tensor y = g.gelu(g.matmul(x, w));
  g.markOutput(y);
  graph::Executor app(*app_context, g);
  app.setInput(x, rng.normal(33 * 7));
  app.step();
  const std::vector<float> first = app.read(y);

  std::future<TrainedBits> worker =
      std::async(std::launch::async, [&] { return trainGpt(*worker_context, seed); });
  int repetitions = 0;
  while (worker.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    app.step();
    EXPECT_EQ(app.read(y), first);
    ++repetitions;
  }
  EXPECT_EQ(worker.get(), alone);
  EXPECT_GT(repetitions, 0);  // the main thread's work ran while the worker trained
  expectNoValidationMessages(*worker_context, "worker");
  expectNoValidationMessages(*app_context, "app");
  worker_context.reset();  // destroyed on the main thread
}

}  // namespace
}  // namespace vkgrad::test
