// Running and fine-tuning an imported model: the importer's graph compiled for the inputs'
// shapes (one compiled graph per shape, kept), its initializers as device parameters, and a
// fine-tuning loop on device-resident rows. What `vkgrad-onnx run` and `train` do, as a
// library.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/onnx/host_tensor.h"
#include "vkgrad/onnx/importer.h"
#include "vkgrad/onnx/model.h"
#include "vkgrad/runtime/precision.h"
#include "vkgrad/training/optimizer.h"

namespace vkgrad::vk {
class Context;
}

namespace vkgrad::graph {
class ParameterStore;
class Trainer;
}  // namespace vkgrad::graph

namespace vkgrad::onnx {

// Integer values as the device's u32 ids; Error naming `what` for one outside 0..2^32-1.
std::vector<uint32_t> toIds(const HostTensor& t, const std::string& what);

class Runner {
 public:
  // model must outlive the runner. Parameters are uploaded on the first run(). fuse: the
  // importer's fusions (onnx/fusions.h); off, every node imports as its own op.
  Runner(vk::Context& context, const Model& model,
         graph::Precision precision = graph::Precision::F32, bool fuse = true);
  ~Runner();

  // Every model input by name (floats for float inputs, integers for integer ones; their
  // shapes fill the model's open axes). Returns the outputs in the model's order, as f32.
  // Throws Error naming a missing, unknown or mistyped input before any device work.
  std::vector<HostTensor> run(const std::map<std::string, HostTensor>& inputs);
  const Imported& imported() const;  // of the last run (its fusions, parameters)
  uint32_t dispatches() const;       // compute dispatches in the last run's recording
  graph::ParameterStore& parameters() { return *store_; }

 private:
  struct Compiled;
  vk::Context& context_;
  const Model& model_;
  graph::Precision precision_;
  bool fuse_;
  std::unique_ptr<graph::ParameterStore> store_;
  std::map<std::string, std::unique_ptr<Compiled>> compiled_;  // by the inputs' shapes
  Compiled* last_ = nullptr;
};

enum class Loss { Mse, CrossEntropy };

struct FineTuneOptions {
  Loss loss = Loss::Mse;
  std::string output;                // the output the loss reads; "" the model's first
  graph::OptimizerConfig optimizer;  // its lr is the learning rate
  int64_t batch = 0;                 // rows per step; 0 all of them
  std::vector<std::string> freeze;   // glob patterns (* and ?) of initializer names not trained
  graph::Precision precision = graph::Precision::F32;
  bool fuse = true;      // the importer's fusions (onnx/fusions.h)
  bool profile = false;  // time every node of the step (trainer().executor().profile())
};

// Trains a model's float initializers on rows held on the device: every input (and the
// target) is an array whose first axis is the row; a step takes `batch` rows by index.
class FineTuner {
 public:
  // inputs: every model input, all rows; target: float (mse: the output's shape per row) or
  // integer class ids (cross-entropy: the output's shape without its last axis). Throws Error
  // naming what does not fit, before any device work.
  FineTuner(vk::Context& context, const Model& model,
            const std::map<std::string, HostTensor>& inputs, const HostTensor& target,
            const FineTuneOptions& options);
  ~FineTuner();

  int64_t rows() const { return rows_; }
  int64_t batch() const { return batch_; }
  // One update on these rows (batch() of them); returns the loss before the update. Reading
  // it back waits for the step (what `vkgrad-onnx train` reports every step); a loop that
  // wants no wait per step uses a graph::Trainer on its own.
  float step(std::span<const uint32_t> rows);
  std::vector<std::string> trained() const;        // the initializers that train, in order
  uint32_t dispatches() const;                     // compute dispatches of one step
  graph::Trainer& trainer() { return *trainer_; }  // its graph, executor and profile
  // The trained values of every device parameter, by initializer name.
  std::map<std::string, std::vector<float>> values() const;
  // The model with its trained initializers (Model::save).
  void save(const std::filesystem::path& path) const;
  graph::ParameterStore& parameters() { return *store_; }

 private:
  const Model& model_;
  int64_t rows_ = 0, batch_ = 0;
  std::unique_ptr<graph::ParameterStore> store_;
  std::vector<std::unique_ptr<graph::Dataset>> datasets_;
  std::unique_ptr<graph::Trainer> trainer_;
};

// True when name matches pattern, where * is any run of characters and ? any one.
bool globMatch(std::string_view pattern, std::string_view name);

}  // namespace vkgrad::onnx
