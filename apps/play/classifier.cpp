#include "play/classifier.h"

#include <cmath>
#include <random>
#include <string>

namespace vkgrad::play {
namespace {

constexpr int kLayers = 3;

// The parameters as tensors of one graph (a graph takes each parameter once).
struct Layers {
  graph::Tensor w[kLayers], b[kLayers];
};
Layers layersOf(graph::Graph& g, const graph::ParameterStore& store) {
  Layers l;
  for (int i = 0; i < kLayers; ++i) {
    l.w[i] = g.parameter(store.at("l" + std::to_string(i) + ".w"));
    l.b[i] = g.parameter(store.at("l" + std::to_string(i) + ".b"));
  }
  return l;
}

// x (N, 2) -> logits (N, kClasses). The parameters come from the store, so the training
// graph and the inference graph compute with the same buffers.
graph::Tensor mlp(graph::Graph& g, const Layers& l, graph::Tensor x) {
  graph::Tensor h = g.gelu(g.matmul(x, l.w[0], l.b[0]));  // (N, hidden)
  h = g.gelu(g.matmul(h, l.w[1], l.b[1]));                // (N, hidden)
  return g.matmul(h, l.w[2], l.b[2]);                     // (N, kClasses)
}

}  // namespace

Spirals makeSpirals(int per_class, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.035f);
  Spirals s;
  for (int c = 0; c < kClasses; ++c)
    for (int i = 0; i < per_class; ++i) {
      const float t = (float(i) + 0.5f) / float(per_class);  // 0 at the centre, 1 outside
      const float angle = 6.2831853f * (float(c) / kClasses + 1.5f * t);
      const float r = 0.1f + 0.9f * t;
      s.xy.push_back(r * std::cos(angle) + noise(rng));
      s.xy.push_back(r * std::sin(angle) + noise(rng));
      s.labels.push_back(uint32_t(c));
    }
  return s;
}

Classifier::Classifier(vk::Context& context, const Spirals& data, const ClassifierOptions& o)
    : context_(context), store_(context) {
  const int64_t n = int64_t(data.labels.size());
  const int64_t hidden = o.hidden;
  store_.add("l0.w", {2, hidden}, graph::Init::xavierUniform());
  store_.add("l0.b", {hidden}, graph::Init::zeros());
  store_.add("l1.w", {hidden, hidden}, graph::Init::xavierUniform());
  store_.add("l1.b", {hidden}, graph::Init::zeros());
  store_.add("l2.w", {hidden, kClasses}, graph::Init::xavierUniform());
  store_.add("l2.b", {kClasses}, graph::Init::zeros());
  store_.initialize(o.seed);
  x_ = graph::uploadDataset(context, "x", {n, 2}, data.xy);
  y_ = graph::uploadDataset(context, "y", {n}, data.labels);
  for (uint32_t i = 0; i < uint32_t(n); ++i) all_rows_.push_back(i);

  graph::TrainerOptions options;
  options.batch = n;  // a few hundred points: every step sees them all
  options.schedule = graph::Schedule::constant(o.lr);
  options.profile = o.slice_ms > 0;  // node times to slice by
  auto loss = [this](graph::Graph& g, std::span<const graph::Tensor> batch) {
    return g.crossEntropy(mlp(g, layersOf(g, store_), batch[0]), batch[1]);
  };
  trainer_ = std::make_unique<graph::Trainer>(
      context, store_, std::vector<const graph::Dataset*>{&x_, &y_}, loss, options);

  // The grid's points, row 0 at the top of the plane, as the fragment shader looks them up.
  std::vector<float> grid;
  for (int j = 0; j < o.grid_height; ++j)
    for (int i = 0; i < o.grid_width; ++i) {
      grid.push_back(o.plane.left +
                     (float(i) + 0.5f) / float(o.grid_width) * (o.plane.right - o.plane.left));
      grid.push_back(o.plane.top -
                     (float(j) + 0.5f) / float(o.grid_height) * (o.plane.top - o.plane.bottom));
    }
  graph::Graph& g = infer_graph_;
  g.setTraining(false);
  const Layers layers = layersOf(g, store_);
  grid_logits_ =
      mlp(g, layers, g.constant("grid", {int64_t(o.grid_width) * o.grid_height, 2}, grid));
  data_loss_ = g.crossEntropy(mlp(g, layers, g.dataset(x_)), g.dataset(y_));
  g.markOutput(grid_logits_);
  g.markOutput(data_loss_);
  graph::CompileOptions compile;
  compile.profile = o.slice_ms > 0;
  // Frames read the logits between an inference's pieces too: no earlier piece may use their
  // bytes for another tensor (the arena's reuse would), so that they hold the last finished
  // inference's logits until the node that writes the new ones.
  compile.reuse_memory = o.slice_ms <= 0;
  infer_ = std::make_unique<graph::Executor>(context, g, compile);
  if (o.slice_ms > 0) {
    // One whole, timed run of each: their node times decide the pieces.
    trainer_->step(all_rows_);
    infer_->step();
    trainer_->executor().sliceByTime(o.slice_ms);
    infer_->sliceByTime(o.slice_ms);
    // And one inference in pieces, not waited for: the first frames wait for its last piece
    // on the device (lastInference()) before they read what its pieces wrote.
    while (!infer_->submitPiece()) {
    }
    inferred_ = context_.submitted();
    inferred_step_ = steps();
  }
}

bool Classifier::trainPiece() {
  const vk::SemaphoreWait waits[] = {
      {context_.timeline(), inferred_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT}};
  const bool last =
      trainer_->stepPiece(all_rows_, std::span<const vk::SemaphoreWait>(waits, inferred_ ? 1 : 0));
  trained_ = context_.submitted();
  return last;
}

std::optional<uint64_t> Classifier::inferPiece(std::span<const vk::SemaphoreWait> app_waits) {
  std::vector<vk::SemaphoreWait> waits(app_waits.begin(), app_waits.end());
  if (trained_)
    waits.push_back({context_.timeline(), trained_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT});
  const bool last = infer_->submitPiece(waits, {});
  inferred_ = context_.submitted();
  if (!last) return std::nullopt;
  inferred_step_ = steps();
  return inferred_;
}

Classifier::~Classifier() = default;

uint64_t Classifier::trainAsync() {
  // A write-after-read of the parameters: the device must finish the inference first.
  const vk::SemaphoreWait waits[] = {
      {context_.timeline(), inferred_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT}};
  trained_ = trainer_->stepAsync(all_rows_,
                                 std::span<const vk::SemaphoreWait>(waits, inferred_ ? 1 : 0), {});
  return trained_;
}

bool Classifier::training() const {
  return trainer_->busy();
}

uint64_t Classifier::inferAsync(std::span<const vk::SemaphoreWait> app_waits) {
  std::vector<vk::SemaphoreWait> waits(app_waits.begin(), app_waits.end());
  // Read-after-write of the parameters: the last step's update first.
  if (trained_)
    waits.push_back({context_.timeline(), trained_, VK_PIPELINE_STAGE_ALL_COMMANDS_BIT});
  inferred_ = infer_->submit(waits, {});
  inferred_step_ = steps();
  return inferred_;
}

bool Classifier::inferring() const {
  return infer_->busy();
}

float Classifier::loss() {
  return inferred_step_ >= 0 ? infer_->readScalar(data_loss_) : 0.0f;
}

void Classifier::releaseResultsTo(uint32_t family) {
  infer_->releaseAfterStep(grid_logits_, family);
  infer_->releaseAfterStep(data_loss_, family);
}

vk::BufferRange Classifier::logits() const {
  return infer_->buffer(grid_logits_);
}

vk::BufferRange Classifier::lossBuffer() const {
  return infer_->buffer(data_loss_);
}

}  // namespace vkgrad::play
