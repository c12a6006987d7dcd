// Training on device-resident data. A Trainer owns one compiled graph (forward, backward,
// optimizer) whose inputs are gathered on the device from Datasets by one index buffer, so
// a step uploads only the batch's indices (and the learning rate when the schedule changes
// it), replays the recording, and downloads the loss only when asked.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/io/safetensors.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/precision.h"
#include "vkgrad/training/lr_schedule.h"
#include "vkgrad/training/optimizer.h"

namespace vkgrad::graph {

class ParameterStore;

struct TrainerOptions {
  int64_t batch = 32;
  // Gradient accumulation: each step takes batch * accumulate indices, runs them as this many
  // micro-batches of `batch` rows one after another (forward and backward each, their
  // parameter gradients summed on the device, training/autograd.h) and updates once: the
  // gradient of the mean loss over all of them, with the activation memory of one
  // micro-batch. The step's loss and metrics are the micro-batches' means. The loss function
  // is called once per micro-batch. evaluate() takes batches of `batch`.
  int64_t accumulate = 1;
  // Activation recomputation (Graph::recomputed): the training graph keeps only the inputs
  // of the model's recomputed segments (its blocks) for the backward pass and runs each
  // segment's forward again before its gradients. Same results, less activation memory.
  bool recompute = false;
  // Only evaluate() is used (a validation set's trainer): no training graph is built, so no
  // gradients, optimizer state or training arena are allocated; step() throws Error.
  bool evaluate_only = false;
  OptimizerConfig optimizer;  // its lr is ignored: the schedule gives every step's
  Schedule schedule = Schedule::constant(1e-3f);
  int64_t loss_every = 0;     // > 0: step() also reads the loss back every this many steps
  uint64_t dropout_seed = 0;  // the graph's generator (dropout, augment); evaluation: none
  bool profile = false;       // time every node of the training step (Executor::profile())
  // The format of activations and their gradients in the training and evaluation graphs
  // (runtime/precision.h); parameters, gradients and optimizer state stay f32.
  Precision precision = Precision::F32;
  // fp16 only: dynamic loss scaling on the device (OptimizerConfig::loss_scale).
  ops::LossScaleOptions loss_scaling;
};

// Builds the model's loss (f32, shape (1)) from a batch: one tensor per dataset, its rows
// picked by the batch's indices, in the order the datasets were given. Called once for the
// training graph and once (on the first evaluate()) for a forward-only graph, so it must take
// its parameters from the store (Graph::parameter(store.at(...))), not add them.
using LossFn = std::function<Tensor(Graph& g, std::span<const Tensor> batch)>;

// A Trainer's graph before it is compiled: the batch's rows gathered from the datasets, the
// loss (and the metrics it marks) and, with `train`, the backward pass, the optimizer and
// (fp16) the loss scale; every tensor in the options' precision. What a Trainer compiles, and
// what estimateTrainer (training/memory_estimate.h) plans without allocating. Throws Error when
// the loss or a metric is not an f32 (1).
struct TrainerGraph {
  Graph g;
  Tensor indices, loss, state;  // state: the optimizer's (train only)
  LossScale loss_scale;         // fp16 training only
  std::vector<Tensor> metrics;  // what the loss function marked as outputs
};
TrainerGraph buildTrainerGraph(std::span<const Dataset* const> datasets, const LossFn& loss,
                               const TrainerOptions& options, bool train);

// The training state of any compiled training graph (Trainer's, or a model's own): the store's
// parameters, every State tensor of `graph` as `exec` holds it (optimizer moments and step, the
// generator), the step count and the caller's metadata, in one safetensors file. Loading checks
// the whole file first and changes nothing when it does not match (Error naming `source` and
// the differences); it returns the saved step count.
void saveTrainingState(const std::filesystem::path& path, const ParameterStore& store,
                       const Graph& graph, Executor& exec, int64_t step,
                       const std::map<std::string, std::string>& metadata);
int64_t loadTrainingState(const Checkpoint& checkpoint, const std::string& source,
                          ParameterStore& store, const Graph& graph, Executor& exec);

class Trainer {
 public:
  static constexpr int64_t kMaxAccumulate = 1024;  // the graph holds every micro-batch's nodes
  // datasets: (N, ...) each with the same N. They and the store must outlive the trainer; the
  // store's parameters are trained as they are (initialize() or load() it first). Throws Error
  // (ShapeError for shapes) on a bad configuration, before any step runs.
  Trainer(vk::Context& context, ParameterStore& store, std::vector<const Dataset*> datasets,
          LossFn loss, const TrainerOptions& options);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // One update on rows `indices` (options.batch of them, each < N) of every dataset. Returns
  // the batch's loss before the update when read_loss is set or on every loss_every-th step;
  // otherwise nothing is read back. Throws ShapeError for a wrong count or an index >= N.
  std::optional<float> step(std::span<const uint32_t> indices, bool read_loss = false);
  // The same update without waiting and without reading anything back, for a render loop:
  // returns its value on the Context's timeline (Executor::submit: waits/signals are the
  // app's semaphores). At most one step is in flight; busy() says whether it still runs, so
  // a frame can skip training instead of blocking. lossAfterAsync() reads the last loss back.
  uint64_t stepAsync(std::span<const uint32_t> indices);
  uint64_t stepAsync(std::span<const uint32_t> indices, std::span<const vk::SemaphoreWait> waits,
                     std::span<const vk::SemaphoreSignal> signals);
  bool busy() const;
  // A step in pieces, for a frame loop whose budget a whole step exceeds: slice the training
  // executor (executor().slice() or sliceByTime()), then submit one piece per frame. The first
  // piece of a step takes its batch, as stepAsync does (indices are ignored for the others);
  // the app's waits and signals go with each piece. Returns true when the piece was the
  // step's last: the step counts then. The same bits as stepAsync.
  bool stepPiece(std::span<const uint32_t> indices, std::span<const vk::SemaphoreWait> waits = {},
                 std::span<const vk::SemaphoreSignal> signals = {});
  // The loss of the last step (waits for it): after stepAsync, when the app wants it.
  float lastLoss();
  // The metrics the loss function marked, in marking order, from the last step that read the
  // loss back (empty before one). Costs no extra wait: they are read with the loss.
  const std::vector<float>& metrics() const { return metrics_; }
  // The mean loss over rows `indices` (a positive multiple of batch), without updating.
  float evaluate(std::span<const uint32_t> indices);

  // The parameters and the step count (metadata "vkgrad.step"), so a loaded trainer continues
  // its schedule. Optimizer moments are not saved: they keep their current device values.
  void save(const std::filesystem::path& path) const;
  void load(const std::filesystem::path& path);

  // Everything the training graph carries from step to step, so a run continues exactly where
  // it stopped: the parameters, every state tensor (optimizer moments and step, the dropout
  // generator), the step count, and the caller's metadata (its batch order, say). A trainer
  // built the same way that loads the file and takes the same steps computes the same bits as
  // one that never stopped. loadState() checks the whole file against this trainer first and
  // changes nothing when it does not match (Error naming the file and the differences);
  // it returns the file's metadata.
  void saveState(const std::filesystem::path& path,
                 const std::map<std::string, std::string>& metadata = {});
  std::map<std::string, std::string> loadState(const std::filesystem::path& path);
  void loadState(const Checkpoint& checkpoint, const std::string& source);  // read elsewhere

  int64_t steps() const { return step_; }
  // fp16 training's loss scale now and the steps it skipped so far (their gradients
  // overflowed); 1 and 0 otherwise. Each reads the device (waits for the last step).
  float lossScale();
  int64_t skippedSteps();
  float learningRate() const { return options_.schedule.at(step_); }  // of the next step
  // GPU time of the last step (timestamp queries; 0 where the queue has none).
  double lastStepMilliseconds() const;
  const Executor& executor() const;
  Executor& executor();  // the training graph's: to slice its step
  const Graph& graph() const;

 private:
  struct Compiled;
  std::unique_ptr<Compiled> build(bool train) const;
  Compiled& training() const;  // the training graph; throws Error when evaluate_only
  void checkIndices(std::span<const uint32_t> indices, const char* what) const;
  void prepareStep(std::span<const uint32_t> indices);  // checks, uploads indices and lr

  vk::Context& context_;
  ParameterStore& store_;
  std::vector<const Dataset*> datasets_;
  LossFn loss_;
  TrainerOptions options_;
  int64_t rows_ = 0;  // N
  int64_t step_ = 0;
  float written_lr_ = 0;  // the learning rate now in the device state buffer
  std::vector<float> metrics_;
  std::unique_ptr<Compiled> train_, eval_;
};

}  // namespace vkgrad::graph
