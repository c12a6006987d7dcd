// Evaluating and using a trained ViT on the device. The evaluator replays one forward graph
// (dropout off) per batch of test rows: the batch's indices go up, the images and labels
// are gathered on the device, and only the batch's confusion counts (classes^2 u32) come
// back. The predictor takes images from the host (files the user names) and returns
// probabilities.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/runtime/executor.h"
#include "vkgrad/training/sweep.h"
#include "vkgrad/vit/vit.h"

namespace vkgrad::vit {

// counts[t * classes + p]: images of true class t predicted as p.
struct Confusion {
  int64_t classes = 0;
  std::vector<uint64_t> counts;
  uint64_t total() const;
  uint64_t correct() const;
  double accuracy() const;                // correct / total; 0 when empty
  double classAccuracy(int64_t t) const;  // of true class t; 0 when it has no images
};

class Evaluator {
 public:
  // images, labels: datasets of the same rows (uploadImages, uploadLabels); they and the
  // store must outlive the evaluator. Throws Error on mismatched datasets or a bad batch.
  Evaluator(vk::Context& context, const graph::ParameterStore& store, const VitConfig& config,
            const graph::Dataset& images, const graph::Dataset& labels, int64_t batch);
  ~Evaluator();

  // The confusion matrix over every row of the datasets (the last partial batch runs on a
  // second graph of its size).
  Confusion evaluate();
  int64_t rows() const { return sweep_->rows(); }

 private:
  VitConfig config_;
  std::unique_ptr<graph::Sweep> sweep_;
};

// Class probabilities of images given as u8 pixels on the host (image*image each).
class Predictor {
 public:
  Predictor(vk::Context& context, const graph::ParameterStore& store, const VitConfig& config,
            int64_t batch);
  ~Predictor();
  // pixels: count images of config.image^2 bytes -> (count, classes) probabilities.
  std::vector<float> probabilities(std::span<const uint8_t> pixels);

 private:
  VitConfig config_;
  int64_t batch_;
  graph::Graph g_;
  graph::Tensor words_, logits_;
  std::unique_ptr<graph::Executor> exec_;
};

// One batch's forward and backward, for checking a model against another framework
// (bench/peers/cnn_torch.py, through `vkgrad-vit dump`): images as u8 pixels (count,
// image*image) and labels (count) from the host; no dropout, no augmentation.
struct BatchGradients {
  std::vector<float> logits;  // (count, classes)
  float loss = 0;             // the mean cross-entropy
  // Each parameter's gradient of the loss, by the store's names, in the store's order.
  std::vector<std::pair<std::string, std::vector<float>>> gradients;
};
BatchGradients batchGradients(vk::Context& context, const graph::ParameterStore& store,
                              const VitConfig& config, std::span<const uint8_t> pixels,
                              std::span<const uint32_t> labels);

}  // namespace vkgrad::vit
