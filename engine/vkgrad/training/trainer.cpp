#include "vkgrad/training/trainer.h"

#include <bit>
#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "vkgrad/core/error.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::graph {

// A graph and its executor; the executor refers to the graph, so both live here, in place.
struct Trainer::Compiled : TrainerGraph {
  std::unique_ptr<Executor> exec;
};

namespace {

// The loss must be an f32 (1); so must every metric the loss function marks.
void checkScalar(const Graph& g, Tensor t, const char* what) {
  const TensorInfo& info = g.tensor(t);
  if (!(info.shape == Shape{1}) || info.dtype != DType::F32)
    throw Error(std::string("trainer: ") + what + " must be an f32 tensor of shape (1), " +
                info.name + " is " + info.shape.str());
}

// (t_0 + ... + t_{n-1}) / n, in the graph; t_0 itself for one.
Tensor mean(Graph& g, const std::vector<Tensor>& ts) {
  Tensor sum = ts.at(0);
  for (size_t k = 1; k < ts.size(); ++k) sum = g.add(sum, ts[k]);
  if (ts.size() == 1) return sum;
  return g.mul(sum, g.constant("trainer.1/n", {1}, {1.0f / float(ts.size())}));
}

}  // namespace

TrainerGraph buildTrainerGraph(std::span<const Dataset* const> datasets, const LossFn& loss_fn,
                               const TrainerOptions& options, bool train) {
  TrainerGraph c;
  Graph& g = c.g;
  g.setTraining(train);
  g.setSeed(options.dropout_seed);
  g.setRecompute(train && options.recompute);
  // Micro-batches (options.accumulate): each a slice of the step's indices, its forward and
  // backward added in turn, all adding to the same parameter gradients.
  const int64_t micro = train ? options.accumulate : 1, b = options.batch;
  c.indices = g.input("batch.indices", {b * micro}, DType::U32);
  OptimizerConfig config = options.optimizer;
  config.lr = options.schedule.at(0);
  if (train && options.precision == Precision::F16) {
    c.loss_scale = addLossScale(g, options.loss_scaling);
    config.loss_scale = c.loss_scale;
    config.loss_scaling = options.loss_scaling;
  }
  std::vector<Tensor> losses;
  std::vector<std::vector<Tensor>> metrics;  // [metric][micro-batch]
  std::optional<Gradients> grads;
  std::optional<Tensor> seed;  // with micro-batches: the gradient each one's loss starts from
  for (int64_t k = 0; k < micro; ++k) {
    const Tensor ids = micro == 1 ? c.indices : g.slice(c.indices, k * b, (k + 1) * b);
    std::vector<Tensor> batch;
    for (const Dataset* d : datasets) batch.push_back(g.gather(g.dataset(*d), ids));
    const size_t marked = g.outputs().size();
    const Tensor loss = loss_fn(g, batch);
    checkScalar(g, loss, "the loss function's loss");
    metrics.resize(g.outputs().size() - marked);
    for (size_t i = marked; i < g.outputs().size(); ++i) {
      checkScalar(g, Tensor{g.outputs()[i]}, "a metric the loss function marks");
      metrics[i - marked].push_back(Tensor{g.outputs()[i]});
    }
    losses.push_back(loss);
    if (!train) continue;
    if (micro == 1) {
      grads = c.loss_scale ? backward(g, loss, c.loss_scale.scale) : backward(g, loss);
      continue;
    }
    // Each micro-batch's mean loss weighs 1/micro: the gradient of the whole step's mean.
    if (!seed) {
      const Tensor share = g.constant("trainer.1/micro", {1}, {1.0f / float(micro)});
      seed = c.loss_scale ? g.mul(c.loss_scale.scale, share) : share;
    }
    grads = k == 0 ? backward(g, loss, *seed) : backward(g, loss, *seed, *grads);
  }
  c.loss = mean(g, losses);
  for (const std::vector<Tensor>& m : metrics) {
    if (m.size() != losses.size())
      throw Error("trainer: the loss function marked a different number of metrics per call");
    c.metrics.push_back(mean(g, m));
    if (micro > 1) g.markOutput(c.metrics.back());
  }
  g.markOutput(c.loss);
  if (train) c.state = addOptimizer(g, *grads, config);
  applyPrecision(g, options.precision);
  return c;
}

Trainer::Trainer(vk::Context& context, ParameterStore& store, std::vector<const Dataset*> datasets,
                 LossFn loss, const TrainerOptions& options)
    : context_(context),
      store_(store),
      datasets_(std::move(datasets)),
      loss_(std::move(loss)),
      options_(options) {
  options_.schedule.validate();
  if (options_.batch <= 0 || options_.batch > int64_t(UINT32_MAX))
    throw ShapeError("trainer: batch " + std::to_string(options_.batch) + " must be positive");
  if (options_.accumulate < 1 || options_.accumulate > kMaxAccumulate ||
      options_.batch * options_.accumulate > int64_t(UINT32_MAX))
    throw ShapeError("trainer: accumulate " + std::to_string(options_.accumulate) +
                     " must be 1 to " + std::to_string(kMaxAccumulate) + " micro-batches per step");
  if (datasets_.empty()) throw Error("trainer: no datasets");
  if (!loss_) throw Error("trainer: no loss function");
  for (const Dataset* d : datasets_) {
    if (!d) throw Error("trainer: a dataset is null");
    if (rows_ == 0) rows_ = d->shape[0];
    if (d->shape[0] != rows_)
      throw ShapeError("trainer: dataset " + d->name + " " + d->shape.str() + " has " +
                       std::to_string(d->shape[0]) + " rows, " + datasets_[0]->name + " " +
                       std::to_string(rows_));
  }
  if (rows_ > int64_t(UINT32_MAX)) throw ShapeError("trainer: datasets exceed 2^32 rows");
  if (options_.evaluate_only) {
    eval_ = build(false);
  } else {
    train_ = build(true);
    written_lr_ = options_.schedule.at(0);  // what build() put in the state
  }
}

Trainer::~Trainer() = default;

Trainer::Compiled& Trainer::training() const {
  if (!train_)
    throw Error("trainer: built for evaluation only (TrainerOptions::evaluate_only): no step");
  return *train_;
}

std::unique_ptr<Trainer::Compiled> Trainer::build(bool train) const {
  auto c = std::make_unique<Compiled>();
  static_cast<TrainerGraph&>(*c) = buildTrainerGraph(datasets_, loss_, options_, train);
  CompileOptions compile;
  compile.profile = train && options_.profile;
  c->exec = std::make_unique<Executor>(context_, c->g, compile);
  return c;
}

void Trainer::checkIndices(std::span<const uint32_t> indices, const char* what) const {
  for (size_t i = 0; i < indices.size(); ++i)
    if (indices[i] >= rows_)
      throw ShapeError(std::string("trainer: ") + what + " index " + std::to_string(indices[i]) +
                       " at position " + std::to_string(i) + " is out of range for " +
                       std::to_string(rows_) + " rows");
}

void Trainer::prepareStep(std::span<const uint32_t> indices) {
  if (int64_t(indices.size()) != options_.batch * options_.accumulate)
    throw ShapeError("trainer: step got " + std::to_string(indices.size()) +
                     " indices for a batch of " + std::to_string(options_.batch) +
                     (options_.accumulate > 1
                          ? " times " + std::to_string(options_.accumulate) + " micro-batches"
                          : std::string()));
  checkIndices(indices, "step");
  Executor& exec = *training().exec;
  exec.setInput(training().indices, indices);
  // Uploaded only when it changes: a constant schedule costs no transfer per step.
  const float lr = options_.schedule.at(step_);
  if (std::bit_cast<uint32_t>(lr) != std::bit_cast<uint32_t>(written_lr_)) {
    exec.setLearningRate(training().state, lr);
    written_lr_ = lr;
  }
}

uint64_t Trainer::stepAsync(std::span<const uint32_t> indices) {
  return stepAsync(indices, {}, {});
}

uint64_t Trainer::stepAsync(std::span<const uint32_t> indices,
                            std::span<const vk::SemaphoreWait> waits,
                            std::span<const vk::SemaphoreSignal> signals) {
  prepareStep(indices);
  const uint64_t value = training().exec->submit(waits, signals);
  ++step_;
  return value;
}

bool Trainer::stepPiece(std::span<const uint32_t> indices, std::span<const vk::SemaphoreWait> waits,
                        std::span<const vk::SemaphoreSignal> signals) {
  Executor& exec = *training().exec;
  if (exec.nextPiece() == 0) prepareStep(indices);
  const bool last = exec.submitPiece(waits, signals);
  if (last) ++step_;
  return last;
}

bool Trainer::busy() const {
  return train_ && train_->exec->busy();
}

float Trainer::lossScale() {
  if (!training().loss_scale) return 1.0f;
  return training().exec->readScalar(training().loss_scale.scale);
}

int64_t Trainer::skippedSteps() {
  if (!training().loss_scale) return 0;
  return training().exec->readWords(training().loss_scale.counters).at(1);
}

float Trainer::lastLoss() {
  if (step_ == 0) throw Error("trainer: lastLoss() before any step");
  return training().exec->readScalar(training().loss);
}

std::optional<float> Trainer::step(std::span<const uint32_t> indices, bool read_loss) {
  prepareStep(indices);
  Executor& exec = *training().exec;
  exec.step();
  ++step_;
  const bool read = read_loss || (options_.loss_every > 0 && step_ % options_.loss_every == 0);
  if (!read) return std::nullopt;
  metrics_.clear();
  for (const Tensor m : training().metrics) metrics_.push_back(exec.readScalar(m));
  return exec.readScalar(training().loss);
}

float Trainer::evaluate(std::span<const uint32_t> indices) {
  const size_t b = size_t(options_.batch);
  if (indices.empty() || indices.size() % b != 0)
    throw ShapeError("trainer: evaluate got " + std::to_string(indices.size()) +
                     " indices, not a positive multiple of the batch " + std::to_string(b));
  checkIndices(indices, "evaluate");
  if (!eval_) eval_ = build(false);
  double sum = 0;
  for (size_t i = 0; i < indices.size(); i += b) {
    eval_->exec->setInput(eval_->indices, indices.subspan(i, b));
    eval_->exec->step();
    sum += eval_->exec->readScalar(eval_->loss);
  }
  return float(sum / double(indices.size() / b));
}

void Trainer::save(const std::filesystem::path& path) const {
  store_.save(path, {{"vkgrad.step", std::to_string(step_)}});
}

namespace {

// The "vkgrad.step" of a checkpoint's metadata; nullopt when absent or not a count.
std::optional<int64_t> savedStep(const std::map<std::string, std::string>& metadata) {
  const auto it = metadata.find("vkgrad.step");
  if (it == metadata.end()) return std::nullopt;
  const std::string& text = it->second;
  int64_t step = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), step);
  if (ec != std::errc() || end != text.data() + text.size() || step < 0) return std::nullopt;
  return step;
}

// State tensors are saved beside the parameters under this prefix, which no parameter name
// of the file can then collide with.
constexpr std::string_view kStatePrefix = "trainer/";

// The training graph's state tensors by the name they are saved under: their own, with
// "#2", "#3", ... on repeats (two gathers each have a "gather.status"), in tensor order,
// which a trainer built the same way repeats.
std::vector<std::pair<int, std::string>> savedStates(const Graph& g) {
  std::vector<std::pair<int, std::string>> out;
  std::map<std::string, int> seen;
  for (int id = 0; id < int(g.tensors().size()); ++id) {
    const TensorInfo& info = g.tensor(Tensor{id});
    if (info.kind != TensorKind::State) continue;
    const int n = ++seen[info.name];
    out.emplace_back(
        id, std::string(kStatePrefix) + info.name + (n > 1 ? "#" + std::to_string(n) : ""));
  }
  return out;
}

}  // namespace

void Trainer::load(const std::filesystem::path& path) {
  // A checkpoint from elsewhere may lack the count: the schedule then goes on from here.
  if (const auto step = savedStep(store_.load(path))) step_ = *step;
}

void saveTrainingState(const std::filesystem::path& path, const ParameterStore& store,
                       const Graph& graph, Executor& exec, int64_t step,
                       const std::map<std::string, std::string>& metadata) {
  Checkpoint checkpoint{store.download(), metadata};
  checkpoint.metadata["vkgrad.step"] = std::to_string(step);
  for (const auto& [id, name] : savedStates(graph)) {
    const TensorInfo& info = graph.tensor(Tensor{id});
    checkpoint.tensors.push_back(
        {name, info.dtype, savedDims(info.shape), exec.readWords(Tensor{id})});
  }
  // Training that went non-finite (a NaN that ReLUs and clamps hide from the loss) stops
  // here, before the last good state is overwritten.
  for (const SavedTensor& t : checkpoint.tensors)
    if (const std::string bad = nonFiniteText(t); !bad.empty())
      throw Error(path.string() + ": not saved: after step " + std::to_string(step) + ", \"" +
                  t.name + "\" " + bad +
                  "; the last checkpoint is kept (a smaller learning rate?)");
  saveSafetensors(path, checkpoint);
}

int64_t loadTrainingState(const Checkpoint& checkpoint, const std::string& where,
                          ParameterStore& store, const Graph& g, Executor& exec) {
  const std::optional<int64_t> step = savedStep(checkpoint.metadata);
  if (!step) throw Error(where + ": not a training state (no vkgrad.step in its metadata)");
  // Split the file into parameters and state tensors; check the states before anything loads.
  std::map<std::string, int> states;  // saved name -> tensor id
  for (const auto& [id, name] : savedStates(g)) states[name] = id;
  std::vector<const SavedTensor*> params;
  std::vector<std::pair<int, const SavedTensor*>> found;
  std::string problems;
  for (const SavedTensor& t : checkpoint.tensors) {
    if (!t.name.starts_with(kStatePrefix)) {
      params.push_back(&t);
      continue;
    }
    const std::string name = t.name.substr(kStatePrefix.size());
    const auto it = states.find(t.name);
    if (it == states.end()) {
      problems += "\n  state \"" + name + "\" is not one of this trainer's";
      continue;
    }
    const TensorInfo& info = g.tensor(Tensor{it->second});
    if (t.dtype != info.dtype || t.shape != savedDims(info.shape)) {
      problems += "\n  state \"" + name + "\": the file has " + ops::dtypeName(t.dtype) + " " +
                  dimsText(t.shape) + ", the trainer " + ops::dtypeName(info.dtype) + " " +
                  info.shape.str();
      continue;
    }
    const int id = it->second;
    states.erase(it);
    if (const std::string bad = nonFiniteText(t); !bad.empty()) {
      problems += "\n  state \"" + name + "\" " + bad;
      continue;
    }
    found.emplace_back(id, &t);
  }
  for (const auto& [name, id] : states)
    problems += "\n  state \"" + name.substr(kStatePrefix.size()) + "\" is missing";
  if (!problems.empty())
    throw Error(where + ": does not match this trainer (nothing loaded):" + problems);
  store.upload(params, where);  // checks the parameters before it uploads any
  for (const auto& [id, t] : found) exec.setState(Tensor{id}, t->data);
  return *step;
}

void Trainer::saveState(const std::filesystem::path& path,
                        const std::map<std::string, std::string>& metadata) {
  saveTrainingState(path, store_, training().g, *training().exec, step_, metadata);
}

std::map<std::string, std::string> Trainer::loadState(const std::filesystem::path& path) {
  Checkpoint checkpoint = loadSafetensors(path);
  loadState(checkpoint, path.string());
  return std::move(checkpoint.metadata);
}

void Trainer::loadState(const Checkpoint& checkpoint, const std::string& where) {
  step_ = loadTrainingState(checkpoint, where, store_, training().g, *training().exec);
  // The learning rate now in the device state is the saved one.
  written_lr_ = std::bit_cast<float>(training().exec->readWords(training().state).at(0));
}

double Trainer::lastStepMilliseconds() const {
  return training().exec->gpuMilliseconds();
}

const Executor& Trainer::executor() const {
  return *training().exec;
}

Executor& Trainer::executor() {
  return *training().exec;
}

const Graph& Trainer::graph() const {
  return training().g;
}

}  // namespace vkgrad::graph
