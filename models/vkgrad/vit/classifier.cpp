#include "vkgrad/vit/classifier.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/ops/confusion.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/autograd.h"

namespace vkgrad::vit {

uint64_t Confusion::total() const {
  return std::accumulate(counts.begin(), counts.end(), uint64_t(0));
}

uint64_t Confusion::correct() const {
  uint64_t n = 0;
  for (int64_t t = 0; t < classes; ++t) n += counts[size_t(t * classes + t)];
  return n;
}

double Confusion::accuracy() const {
  const uint64_t n = total();
  return n ? double(correct()) / double(n) : 0.0;
}

double Confusion::classAccuracy(int64_t t) const {
  uint64_t n = 0;
  for (int64_t p = 0; p < classes; ++p) n += counts[size_t(t * classes + p)];
  return n ? double(counts[size_t(t * classes + t)]) / double(n) : 0.0;
}

Evaluator::Evaluator(vk::Context& context, const graph::ParameterStore& store,
                     const VitConfig& config, const graph::Dataset& images,
                     const graph::Dataset& labels, int64_t batch)
    : config_(config) {
  config_.validate();
  const int64_t rows = images.shape[0];
  if (labels.shape.rank() != 1 || labels.shape[0] != rows)
    throw Error("Evaluator: " + std::to_string(rows) + " images but labels " + labels.shape.str());
  if (batch <= 0) throw Error("Evaluator: the batch must be positive");
  // Each batch ends in its confusion counts, added up on the host.
  sweep_ = std::make_unique<graph::Sweep>(
      context, rows, batch, [&](graph::Graph& g, graph::Tensor indices) {
        const graph::Tensor words = g.gather(g.dataset(images), indices);
        const graph::Tensor truth = g.gather(g.dataset(labels), indices);
        return std::vector<graph::Tensor>{
            graph::confusion(g, vitLogits(g, store, config_, words), truth)};
      });
}

Evaluator::~Evaluator() = default;

Confusion Evaluator::evaluate() {
  Confusion c{config_.classes, std::vector<uint64_t>(size_t(config_.classes * config_.classes))};
  sweep_->run({}, [&](graph::Sweep::Pass& pass) {
    const std::vector<uint32_t> counts = pass.exec->readWords(pass.outputs[0]);
    for (size_t i = 0; i < counts.size(); ++i) c.counts[i] += counts[i];
  });
  return c;
}

Predictor::Predictor(vk::Context& context, const graph::ParameterStore& store,
                     const VitConfig& config, int64_t batch)
    : config_(config), batch_(batch) {
  config_.validate();
  if (batch <= 0) throw Error("Predictor: the batch must be positive");
  g_.setTraining(false);
  words_ = g_.input("images", {batch, config_.image * config_.image / 4}, ops::DType::U32);
  logits_ = vitLogits(g_, store, config_, words_);
  g_.markOutput(logits_);
  exec_ = std::make_unique<graph::Executor>(context, g_);
}

Predictor::~Predictor() = default;

std::vector<float> Predictor::probabilities(std::span<const uint8_t> pixels) {
  const size_t image = size_t(config_.image * config_.image);
  if (pixels.size() % image != 0)
    throw Error("Predictor: " + std::to_string(pixels.size()) + " bytes are not whole " +
                std::to_string(config_.image) + "x" + std::to_string(config_.image) + " images");
  const size_t count = pixels.size() / image, classes = size_t(config_.classes);
  std::vector<float> out;
  std::vector<uint32_t> words(size_t(batch_) * image / 4, 0);
  for (size_t first = 0; first < count; first += size_t(batch_)) {
    const size_t n = std::min(count - first, size_t(batch_));
    std::fill(words.begin(), words.end(), 0u);
    std::memcpy(words.data(), pixels.data() + first * image, n * image);
    exec_->setInput(words_, words);
    exec_->step();
    const std::vector<float> logits = exec_->read(logits_);
    for (size_t i = 0; i < n; ++i) {
      const float* row = logits.data() + i * classes;
      // Finite weights can still overflow (weights of 3e38): a NaN probability is no answer.
      for (size_t c = 0; c < classes; ++c)
        if (!std::isfinite(row[c]))
          throw Error("Predictor: image " + std::to_string(first + i) + "'s logit of class " +
                      std::to_string(c) + " is " + std::to_string(row[c]) +
                      ": the model's weights overflow");
      const float top = *std::max_element(row, row + classes);
      double sum = 0;
      for (size_t c = 0; c < classes; ++c) sum += std::exp(double(row[c] - top));
      for (size_t c = 0; c < classes; ++c)
        out.push_back(float(std::exp(double(row[c] - top)) / sum));
    }
  }
  return out;
}

BatchGradients batchGradients(vk::Context& context, const graph::ParameterStore& store,
                              const VitConfig& config, std::span<const uint8_t> pixels,
                              std::span<const uint32_t> labels) {
  const int64_t count = int64_t(labels.size()), image = config.image * config.image;
  if (count == 0 || int64_t(pixels.size()) != count * image)
    throw Error("batchGradients: " + std::to_string(pixels.size()) + " pixels for " +
                std::to_string(count) + " labels of " + std::to_string(image) + "-pixel images");
  graph::Graph g;
  g.setTraining(false);  // no dropout, no augmentation: a deterministic function to compare
  const graph::Tensor words = g.input("images", {count, image / 4}, ops::DType::U32);
  const graph::Tensor truth = g.input("labels", {count}, ops::DType::U32);
  const graph::Tensor logits = vitLogits(g, store, config, words);
  const graph::Tensor loss = g.crossEntropy(logits, truth);
  g.markOutput(logits);
  g.markOutput(loss);
  const graph::Gradients grads = graph::backward(g, loss);
  graph::Executor exec(context, g);
  std::vector<uint32_t> packed(pixels.size() / 4);
  std::memcpy(packed.data(), pixels.data(), pixels.size());  // little-endian, as uploadImages
  exec.setInput(words, packed);
  exec.setInput(truth, std::vector<uint32_t>(labels.begin(), labels.end()));
  exec.step();
  BatchGradients out{exec.read(logits), exec.readScalar(loss), {}};
  for (const auto& [param, grad] : grads.parameters)
    out.gradients.emplace_back(g.tensor(param).parameter->name, exec.read(grad));
  return out;
}

}  // namespace vkgrad::vit
