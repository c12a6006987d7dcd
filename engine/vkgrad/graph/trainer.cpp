#include "vkgrad/graph/trainer.h"

#include <bit>
#include <charconv>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "vkgrad/core/error.h"
#include "vkgrad/graph/autograd.h"
#include "vkgrad/graph/parameters.h"
#include "vkgrad/graph/safetensors.h"

namespace vkgrad::graph {

// A graph and its executor; the executor refers to the graph, so both live here, in place.
struct Trainer::Compiled : TrainerGraph {
  std::unique_ptr<Executor> exec;
};

TrainerGraph buildTrainerGraph(std::span<const Dataset* const> datasets, const LossFn& loss_fn,
                               const TrainerOptions& options, bool train) {
  TrainerGraph c;
  Graph& g = c.g;
  g.setTraining(train);
  g.setSeed(options.dropout_seed);
  c.indices = g.input("batch.indices", {options.batch}, DType::U32);
  std::vector<Tensor> batch;
  for (const Dataset* d : datasets) batch.push_back(g.gather(g.dataset(*d), c.indices));
  c.loss = loss_fn(g, batch);
  const TensorInfo& loss = g.tensor(c.loss);
  if (!(loss.shape == Shape{1}) || loss.dtype != DType::F32)
    throw Error("trainer: the loss function must return an f32 tensor of shape (1), got " +
                loss.shape.str());
  for (const int id : g.outputs()) {
    const TensorInfo& m = g.tensor(id);
    if (!(m.shape == Shape{1}) || m.dtype != DType::F32)
      throw Error("trainer: a metric the loss function marks must be an f32 tensor of shape (1), " +
                  m.name + " is " + m.shape.str());
    c.metrics.push_back(Tensor{id});
  }
  g.markOutput(c.loss);
  if (train) {
    OptimizerConfig config = options.optimizer;
    config.lr = options.schedule.at(0);
    if (options.precision == Precision::F16) {
      c.loss_scale = addLossScale(g, options.loss_scaling);
      config.loss_scale = c.loss_scale;
      config.loss_scaling = options.loss_scaling;
    }
    const Gradients grads =
        c.loss_scale ? backward(g, c.loss, c.loss_scale.scale) : backward(g, c.loss);
    c.state = addOptimizer(g, grads, config);
  }
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
  train_ = build(true);
  written_lr_ = options_.schedule.at(0);  // what build() put in the state
}

Trainer::~Trainer() = default;

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
  if (int64_t(indices.size()) != options_.batch)
    throw ShapeError("trainer: step got " + std::to_string(indices.size()) +
                     " indices for a batch of " + std::to_string(options_.batch));
  checkIndices(indices, "step");
  Executor& exec = *train_->exec;
  exec.setInput(train_->indices, indices);
  // Uploaded only when it changes: a constant schedule costs no transfer per step.
  const float lr = options_.schedule.at(step_);
  if (std::bit_cast<uint32_t>(lr) != std::bit_cast<uint32_t>(written_lr_)) {
    exec.setLearningRate(train_->state, lr);
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
  const uint64_t value = train_->exec->submit(waits, signals);
  ++step_;
  return value;
}

bool Trainer::busy() const {
  return train_->exec->busy();
}

float Trainer::lossScale() {
  if (!train_->loss_scale) return 1.0f;
  return train_->exec->readScalar(train_->loss_scale.scale);
}

int64_t Trainer::skippedSteps() {
  if (!train_->loss_scale) return 0;
  return train_->exec->readWords(train_->loss_scale.counters).at(1);
}

float Trainer::lastLoss() {
  if (step_ == 0) throw Error("trainer: lastLoss() before any step");
  return train_->exec->readScalar(train_->loss);
}

std::optional<float> Trainer::step(std::span<const uint32_t> indices, bool read_loss) {
  prepareStep(indices);
  Executor& exec = *train_->exec;
  exec.step();
  ++step_;
  const bool read = read_loss || (options_.loss_every > 0 && step_ % options_.loss_every == 0);
  if (!read) return std::nullopt;
  metrics_.clear();
  for (const Tensor m : train_->metrics) metrics_.push_back(exec.readScalar(m));
  return exec.readScalar(train_->loss);
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
  saveTrainingState(path, store_, train_->g, *train_->exec, step_, metadata);
}

std::map<std::string, std::string> Trainer::loadState(const std::filesystem::path& path) {
  Checkpoint checkpoint = loadSafetensors(path);
  loadState(checkpoint, path.string());
  return std::move(checkpoint.metadata);
}

void Trainer::loadState(const Checkpoint& checkpoint, const std::string& where) {
  step_ = loadTrainingState(checkpoint, where, store_, train_->g, *train_->exec);
  // The learning rate now in the device state is the saved one.
  written_lr_ = std::bit_cast<float>(train_->exec->readWords(train_->state).at(0));
}

double Trainer::lastStepMilliseconds() const {
  return train_->exec->gpuMilliseconds();
}

const Executor& Trainer::executor() const {
  return *train_->exec;
}

const Graph& Trainer::graph() const {
  return train_->g;
}

}  // namespace vkgrad::graph
