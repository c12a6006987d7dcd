// What the window shows, on the engine's side: an MLP (2 -> H -> H -> 3, GELU; H = 32 by
// default) trained by
// vkgrad on three interleaved spirals, and a second, forward-only graph over the same
// parameters that evaluates its logits at every point of a grid covering the plane (and its
// loss on the whole data set). Both are submitted without waiting, on the engine's timeline;
// the app's drawing reads the grid's logits straight from the engine's buffer.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::play {

inline constexpr int kClasses = 3;

// The rectangle of the plane the window shows: x from left to right, y from bottom to top.
struct Plane {
  float left, bottom, right, top;
};

struct Spirals {
  std::vector<float> xy;         // (N, 2)
  std::vector<uint32_t> labels;  // (N) in [0, kClasses)
};
// kClasses arms of per_class points each, winding 1.5 turns out from the centre to radius 1,
// with Gaussian noise; the same seed gives the same points.
Spirals makeSpirals(int per_class, uint64_t seed);

struct ClassifierOptions {
  int grid_width = 128, grid_height = 96;  // inference points across and down the plane
  Plane plane{-1.6f, -1.2f, 1.6f, 1.2f};
  float lr = 0.02f;  // AdamW, constant
  uint64_t seed = 1;
  int hidden = 32;  // the hidden layers' width
  // > 0: the training step and the inference are each recorded in pieces of at most this many
  // ms of GPU time (Executor::sliceByTime, from one profiled run of each at the start), for
  // trainPiece() and inferPiece().
  double slice_ms = 0.0;
};

class Classifier {
 public:
  // Uploads the data and the grid, initialises the parameters and compiles both graphs.
  Classifier(vk::Context& context, const Spirals& data, const ClassifierOptions& options);
  ~Classifier();
  Classifier(const Classifier&) = delete;
  Classifier& operator=(const Classifier&) = delete;

  // One AdamW step on the whole data set, submitted without waiting; returns its value on
  // the engine's timeline. The step overwrites parameters the last inference reads, so it
  // waits for that on the device. A call while a step is still running waits for it (host).
  uint64_t trainAsync();
  bool training() const;  // a step is in flight
  int64_t steps() const { return trainer_->steps(); }

  // The grid's logits and the data set's loss for the parameters as the last submitted step
  // leaves them, submitted without waiting, after `waits` (the app's: the frame still
  // reading the logits) and the last training step on the device. Returns its timeline value.
  uint64_t inferAsync(std::span<const vk::SemaphoreWait> waits);
  bool inferring() const;                                  // an inference is in flight
  int64_t inferredStep() const { return inferred_step_; }  // steps() at the last inferAsync
  // The data set's mean cross-entropy from the last inference (0 before one); waits for it (a
  // host read: for the end of a run, not for frames).
  float loss();

  // --- in pieces (ClassifierOptions::slice_ms): one piece per call, without waiting
  int trainPieces() const { return trainer_->executor().pieces(); }
  int inferPieces() const { return infer_->pieces(); }
  bool pieceBusy() const { return trainer_->busy() || infer_->busy(); }
  bool stepOpen() const { return trainer_->executor().nextPiece() != 0; }  // a step is part-way
  bool inferenceOpen() const { return infer_->nextPiece() != 0; }  // an inference is part-way
  // The next piece of the training step; true when it was the step's last.
  bool trainPiece();
  // The next piece of an inference, after `waits` (the app's); its timeline value when it was
  // the inference's last (the logits are then those of steps()), else nothing.
  std::optional<uint64_t> inferPiece(std::span<const vk::SemaphoreWait> waits);
  uint64_t lastInference() const { return inferred_; }  // the last inference submission's value

  // Where the last inference's results live, valid while this object lives. logits:
  // (grid_height, grid_width, kClasses) f32, row 0 at the top of the plane, point (i, j) at
  // the centre of cell (i, j); loss: (1) f32, the data set's mean cross-entropy.
  vk::BufferRange logits() const;
  vk::BufferRange lossBuffer() const;
  // Every inference from now on ends by releasing logits() and lossBuffer() to `family`, the
  // app's (Executor::releaseAfterStep): for exclusive buffers on a separate compute family.
  // loss() is the app's copy's business then (the engine would read a released buffer).
  void releaseResultsTo(uint32_t family);

 private:
  vk::Context& context_;
  graph::ParameterStore store_;
  graph::Dataset x_, y_;
  std::vector<uint32_t> all_rows_;  // the batch: every point
  std::unique_ptr<graph::Trainer> trainer_;
  graph::Graph infer_graph_;
  graph::Tensor grid_logits_, data_loss_;
  std::unique_ptr<graph::Executor> infer_;
  uint64_t trained_ = 0, inferred_ = 0;  // the last submissions' timeline values
  int64_t inferred_step_ = -1;
};

}  // namespace vkgrad::play
