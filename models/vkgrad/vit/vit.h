// A vision transformer (ViT) on the graph, as the lecture notes build it: image -> patches
// -> linear projection, a learned class token prepended, a learned positional embedding
// added -> `layers` non-causal transformer blocks (nn/transformer.h) -> a final LayerNorm
// (pre-norm only: a post-norm block already ends in one) -> a linear head on the class token.
//
// Training graphs may augment each batch on the device first (a random shift and mirror,
// VitConfig::augment_pad and augment_flip).
//
// Images live on the device as u8 pixels, 4 per u32 word (uploadImages): 60000 Fashion-MNIST
// images take 47 MB instead of 188 MB as f32, below lavapipe's 128 MiB binding limit. A
// batch is gathered by index and normalised on the device (graph::bytesToFloat).
//
// Parameter names: patch.{w,b} (patch*patch, width), cls (width), pos (patches + 1, width),
// h<i>.* for block i, ln_f.{g,b} (pre-norm), head.{w,b} (width, classes).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/nn/transformer.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::vit {

// What vkgrad-vit trains on the images: the vision transformer, or a small convolutional
// network (vit/cnn.h) on the same data path, batches, evaluation and checkpoints.
enum class ModelKind { Vit, Cnn };
const char* modelKindName(ModelKind kind);  // "vit", "cnn"
// Throws Error naming the two kinds otherwise.
ModelKind modelKindFromName(const std::string& name);

struct VitConfig {
  ModelKind kind = ModelKind::Vit;
  int64_t image = 28;  // height and width of the (square, single-channel) images
  int64_t patch = 7;   // a divisor of image
  int64_t classes = 10;
  int64_t width = 64;  // a multiple of heads
  int64_t layers = 4;
  int64_t heads = 4;
  int64_t mlp_ratio = 2;  // the MLP's hidden width is mlp_ratio * width
  nn::Norm norm = nn::Norm::Pre;
  nn::ActivationSpec activation = nn::ActivationSpec::gelu();
  float dropout = 0.0f;  // the CNN's: after its hidden layer
  // The CNN's widths (kind Cnn; the ViT's fields above, but image, classes and dropout, are
  // then unused): channels of its two convolutions and its hidden layer.
  int64_t conv1 = 32, conv2 = 64, hidden = 1024;
  // Training-time augmentation (graph::augment): each image shifted by up to augment_pad
  // pixels each way (0 <= pad < image/2), the background shifted in, and mirrored left to
  // right half the time with augment_flip. Evaluation graphs never augment.
  int64_t augment_pad = 0;
  bool augment_flip = false;
  // Pixels are normalised as (byte / 255 - mean) / stddev (Fashion-MNIST's training set).
  float mean = 0.2860f, stddev = 0.3530f;

  // Throws Error naming the bad field (a patch that does not divide the image, ...).
  void validate() const;
  int64_t patches() const { return (image / patch) * (image / patch); }
  nn::BlockConfig block() const;
};

// Adds every parameter (the CNN's: declareCnn, vit/cnn.h): weights xavier-uniform except the
// positional table and the class token, N(0, 0.02); biases 0; LayerNorm gain 1. Call
// store.initialize(seed) afterwards.
void declareVit(graph::ParameterStore& store, const VitConfig& config);

// words: (B, image*image/4) u32, packed pixels -> logits (B, classes), of the ViT or, for
// kind Cnn, of the CNN (cnnLogits) on the same normalised, augmented images.
graph::Tensor vitLogits(graph::Graph& g, const graph::ParameterStore& store,
                        const VitConfig& config, graph::Tensor words);
// The mean cross-entropy of the logits against labels (B) u32.
graph::Tensor vitLoss(graph::Graph& g, const graph::ParameterStore& store, const VitConfig& config,
                      graph::Tensor words, graph::Tensor labels);
// A Trainer loss over two datasets: packed images and their labels. The store and config
// must outlive the Trainer.
graph::LossFn vitLossFn(const graph::ParameterStore& store, const VitConfig& config);

// count images of rows*cols u8 pixels (row-major, image after image) as a (count, words)
// u32 dataset, 4 pixels per word (rows*cols must be a multiple of 4). Throws Error otherwise.
graph::Dataset uploadImages(vk::Context& context, const std::string& name,
                            std::span<const uint8_t> pixels, int64_t count, int64_t rows,
                            int64_t cols);
// labels as a (count) u32 dataset.
graph::Dataset uploadLabels(vk::Context& context, const std::string& name,
                            std::span<const uint8_t> labels);

}  // namespace vkgrad::vit
