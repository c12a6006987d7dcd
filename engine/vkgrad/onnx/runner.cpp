#include "vkgrad/onnx/runner.h"

#include <algorithm>
#include <cstring>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::onnx {

std::vector<uint32_t> toIds(const HostTensor& t, const std::string& what) {
  std::vector<uint32_t> ids;
  ids.reserve(t.ints.size());
  for (int64_t v : t.ints) {
    if (v < 0 || v > int64_t(UINT32_MAX))
      throw Error(what + " holds " + std::to_string(v) + ": ids must lie in 0..2^32-1");
    ids.push_back(uint32_t(v));
  }
  return ids;
}

bool globMatch(std::string_view pattern, std::string_view name) {
  if (pattern.empty()) return name.empty();
  if (pattern[0] == '*')
    for (size_t i = 0; i <= name.size(); ++i)
      if (globMatch(pattern.substr(1), name.substr(i))) return true;
  if (pattern[0] == '*') return false;
  if (name.empty() || (pattern[0] != '?' && pattern[0] != name[0])) return false;
  return globMatch(pattern.substr(1), name.substr(1));
}

namespace {

// Checks the inputs against the model: each one given once, of its kind (float or integer).
void checkInputs(const Model& model, const std::map<std::string, HostTensor>& inputs) {
  for (const auto& entry : inputs) {
    const std::string& name = entry.first;  // a plain reference: lambdas capture it
    const HostTensor& t = entry.second;
    const auto& ins = model.inputs();
    const auto it =
        std::find_if(ins.begin(), ins.end(), [&](const ValueInfo& v) { return v.name == name; });
    if (it == ins.end()) {
      std::string names;
      for (const auto& v : ins) names += (names.empty() ? "" : ", ") + v.name;
      throw Error(model.source() + ": the model has no input \"" + name +
                  "\" (its inputs: " + names + ")");
    }
    if (isFloatType(it->type) != t.isFloat())
      throw Error(model.source() + ": input " + it->str() + " was given " +
                  (t.isFloat() ? "floats" : "integers"));
  }
  for (const auto& v : model.inputs())
    if (!inputs.count(v.name)) throw Error(model.source() + ": input " + v.str() + " is not given");
}

// The store gets the initializers the graph reads at these shapes that it lacks.
void addMissing(graph::ParameterStore& store, const Model& model, const ImportOptions& options) {
  std::vector<std::string> missing;
  for (const std::string& name : deviceInitializers(model, options))
    if (!store.find(name)) missing.push_back(name);
  if (!missing.empty()) addParameters(store, model, missing);
}

// The Trainer's loss: the model imported onto the batch's rows (inputs in `names` order, the
// target last), its output `out_index` against the target by MSE or cross-entropy.
graph::LossFn lossFunction(const Model& model, const graph::ParameterStore& store,
                           const ImportOptions& shapes, const std::vector<std::string>& names,
                           size_t out_index, Loss loss, const std::vector<int64_t>& target_dims,
                           int64_t batch) {
  return [&model, &store, shapes, names, out_index, loss, target_dims, batch](
             graph::Graph& g, std::span<const graph::Tensor> batch_tensors) {
    ImportOptions o = shapes;
    o.mark_outputs = false;
    for (size_t i = 0; i < names.size(); ++i) o.provided[names[i]] = batch_tensors[i];
    const Imported imported = importGraph(g, model, store, o);
    const Port& out = imported.outputs[out_index];
    const graph::Tensor t = batch_tensors[names.size()];
    std::vector<int64_t> per_row(target_dims.begin() + 1, target_dims.end());
    if (loss == Loss::Mse) {
      std::vector<int64_t> want{batch};
      want.insert(want.end(), per_row.begin(), per_row.end());
      if (out.dims != want)
        throw Error("output " + out.name + " " + dimsText(out.dims) + " and the target rows " +
                    dimsText(want) + " differ");
      const graph::Tensor d = g.sub(out.tensor, t);
      return g.mean(g.mul(d, d));
    }
    if (out.dims.size() != target_dims.size() + 1 || out.dims[0] != batch ||
        !std::equal(per_row.begin(), per_row.end(), out.dims.begin() + 1))
      throw Error("output " + out.name + " " + dimsText(out.dims) +
                  " is not (rows, ..., classes) for class ids of shape " + dimsText(target_dims));
    return g.crossEntropy(out.tensor, t);
  };
}

}  // namespace

struct Runner::Compiled {
  graph::Graph graph;
  Imported imported;
  std::unique_ptr<graph::Executor> executor;
};

Runner::Runner(vk::Context& context, const Model& model, graph::Precision precision, bool fuse)
    : context_(context),
      model_(model),
      precision_(precision),
      fuse_(fuse),
      store_(std::make_unique<graph::ParameterStore>(context)) {}

Runner::~Runner() = default;

const Imported& Runner::imported() const {
  if (!last_) throw Error("Runner::imported: nothing has run yet");
  return last_->imported;
}

uint32_t Runner::dispatches() const {
  if (!last_) throw Error("Runner::dispatches: nothing has run yet");
  return last_->executor->dispatchCount();
}

std::vector<HostTensor> Runner::run(const std::map<std::string, HostTensor>& inputs) {
  checkInputs(model_, inputs);
  ImportOptions options;
  options.fuse = fuse_;
  std::string key;
  for (const auto& [name, t] : inputs) {
    options.input_dims[name] = t.dims;
    key += name + dimsText(t.dims) + ";";
  }
  auto& slot = compiled_[key];
  if (!slot) {
    auto c = std::make_unique<Compiled>();
    addMissing(*store_, model_, options);
    c->graph.setTraining(false);
    c->imported = importGraph(c->graph, model_, *store_, options);
    graph::applyPrecision(c->graph, precision_);
    c->executor = std::make_unique<graph::Executor>(context_, c->graph);
    slot = std::move(c);
  }
  last_ = slot.get();
  for (const Port& in : slot->imported.inputs) {
    if (!in.used) continue;
    const HostTensor& t = inputs.at(in.name);
    if (t.isFloat())
      slot->executor->setInput(in.tensor, t.floats);
    else
      slot->executor->setInput(in.tensor, toIds(t, "input " + in.name));
  }
  slot->executor->step();
  std::vector<HostTensor> outputs;
  for (const Port& out : slot->imported.outputs)
    outputs.push_back(HostTensor::ofFloats(out.dims, slot->executor->read(out.tensor)));
  return outputs;
}

// --- fine-tuning

FineTuner::FineTuner(vk::Context& context, const Model& model,
                     const std::map<std::string, HostTensor>& inputs, const HostTensor& target,
                     const FineTuneOptions& options)
    : model_(model) {
  checkInputs(model, inputs);
  rows_ = -1;
  const auto take_rows = [&](const std::string& what, const std::vector<int64_t>& dims) {
    if (dims.empty()) throw Error(what + " is a scalar: rows are its first axis");
    if (rows_ >= 0 && dims[0] != rows_)
      throw Error(what + " has " + std::to_string(dims[0]) + " rows, the inputs " +
                  std::to_string(rows_));
    rows_ = dims[0];
  };
  for (const ValueInfo& v : model.inputs()) take_rows("input " + v.name, inputs.at(v.name).dims);
  take_rows("the target", target.dims);
  batch_ = options.batch == 0 ? rows_ : options.batch;
  if (batch_ < 1 || batch_ > rows_)
    throw Error("batch " + std::to_string(batch_) + " for " + std::to_string(rows_) + " rows");

  // The rows live on the device; a step gathers its batch there.
  ImportOptions shapes;
  shapes.fuse = options.fuse;
  std::vector<const graph::Dataset*> sets;
  const auto upload = [&](const std::string& name, const HostTensor& t) {
    const graph::Shape shape = deviceShape(t.dims);
    datasets_.push_back(std::make_unique<graph::Dataset>(
        t.isFloat() ? graph::uploadDataset(context, name, shape, t.floats)
                    : graph::uploadDataset(context, name, shape, toIds(t, name))));
    sets.push_back(datasets_.back().get());
  };
  std::vector<std::string> names;
  for (const ValueInfo& v : model.inputs()) {
    const HostTensor& t = inputs.at(v.name);
    upload(v.name, t);
    names.push_back(v.name);
    std::vector<int64_t> dims = t.dims;
    dims[0] = batch_;
    shapes.input_dims[v.name] = dims;
  }
  upload("target", target);

  store_ = std::make_unique<graph::ParameterStore>(context);
  addMissing(*store_, model, shapes);
  for (const std::string& pattern : options.freeze) {
    size_t matched = 0;
    for (const auto& p : store_->all())
      if (globMatch(pattern, p->name)) store_->setFrozen(p->name, true), ++matched;
    if (matched == 0)
      throw Error("--freeze " + pattern + " matches no initializer the graph reads");
  }
  if (store_->trainableElements() == 0) throw Error(model.source() + ": nothing left to train");

  // Checked once here, so that the loss function below cannot fail on a wrong output.
  const auto& outs = model.outputs();
  const std::string output = options.output.empty() ? outs.at(0).name : options.output;
  const auto out_it =
      std::find_if(outs.begin(), outs.end(), [&](const ValueInfo& v) { return v.name == output; });
  if (out_it == outs.end())
    throw Error(model.source() + ": the model has no output \"" + output + "\"");
  const size_t out_index = size_t(out_it - outs.begin());
  const bool integer_target = !target.isFloat();
  if ((options.loss == Loss::CrossEntropy) != integer_target)
    throw Error(options.loss == Loss::CrossEntropy
                    ? "cross-entropy takes integer class ids as the target"
                    : "mse takes a float target");
  const graph::LossFn fn =
      lossFunction(model, *store_, shapes, names, out_index, options.loss, target.dims, batch_);
  graph::TrainerOptions to;
  to.batch = batch_;
  to.optimizer = options.optimizer;
  to.schedule = graph::Schedule::constant(options.optimizer.lr);
  to.precision = options.precision;
  to.profile = options.profile;
  trainer_ = std::make_unique<graph::Trainer>(context, *store_, sets, fn, to);
}

FineTuner::~FineTuner() = default;

float FineTuner::step(std::span<const uint32_t> rows) {
  return *trainer_->step(rows, true);
}

uint32_t FineTuner::dispatches() const {
  return trainer_->executor().dispatchCount();
}

std::vector<std::string> FineTuner::trained() const {
  std::vector<std::string> names;
  for (const auto& p : store_->all())
    if (!p->frozen) names.push_back(p->name);
  return names;
}

std::map<std::string, std::vector<float>> FineTuner::values() const {
  std::map<std::string, std::vector<float>> out;
  for (const graph::SavedTensor& t : store_->download()) {
    std::vector<float> v(t.data.size());
    std::memcpy(v.data(), t.data.data(), v.size() * 4);
    out[t.name] = std::move(v);
  }
  return out;
}

void FineTuner::save(const std::filesystem::path& path) const {
  model_.save(path, values());
}

}  // namespace vkgrad::onnx
