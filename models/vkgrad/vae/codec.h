// Evaluating and using a trained VAE on the device.
//
// The evaluator replays one forward graph per batch of test rows: the batch's indices go up,
// the images are gathered on the device, and each batch's two loss terms are added into
// device totals (Graph::runningTotal), read back once at the end. z is sampled as in training,
// from a generator seeded by the caller, so an evaluation is reproducible.
//
// The encoder and decoder take host data (the apps' pictures, files the user names): packed
// pixels in, posterior means out; latent points in, pixel probabilities out.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "vkgrad/runtime/executor.h"
#include "vkgrad/training/sweep.h"
#include "vkgrad/vae/vae.h"

namespace vkgrad::vae {

// Per image, in nats: the mean over the images evaluated.
struct VaeLoss {
  double recon = 0, kl = 0;
  int64_t images = 0;
  double elbo() const { return recon + kl; }  // the negative ELBO (beta = 1)
};

class Evaluator {
 public:
  // images: packed pixels (vit::uploadImages' layout); it and the store must outlive the
  // evaluator. Throws Error on a bad dataset or batch.
  Evaluator(vk::Context& context, const graph::ParameterStore& store, const VaeConfig& config,
            const graph::Dataset& images, int64_t batch, uint64_t seed);
  ~Evaluator();
  // Every row of the dataset (a last partial batch runs on a second graph of its size).
  VaeLoss evaluate();

 private:
  std::unique_ptr<graph::Sweep> sweep_;
};

// Posterior means mu of images given as u8 pixels on the host.
class Encoder {
 public:
  Encoder(vk::Context& context, const graph::ParameterStore& store, const VaeConfig& config,
          int64_t batch);
  ~Encoder();
  // pixels: count images of config.pixels() bytes -> (count, latent) means.
  std::vector<float> means(std::span<const uint8_t> pixels);

 private:
  VaeConfig config_;
  int64_t batch_;
  graph::Graph g_;
  graph::Tensor words_, mu_;
  std::unique_ptr<graph::Executor> exec_;
};

// Decoded images of latent points given on the host.
class Decoder {
 public:
  Decoder(vk::Context& context, const graph::ParameterStore& store, const VaeConfig& config,
          int64_t batch);
  ~Decoder();
  // z: count points of config.latent values -> (count, pixels) probabilities in [0, 1].
  std::vector<float> decode(std::span<const float> z);

 private:
  VaeConfig config_;
  int64_t batch_;
  graph::Graph g_;
  graph::Tensor z_, image_;
  std::unique_ptr<graph::Executor> exec_;
};

// Probabilities in [0, 1] as grey bytes (rounded, clamped).
std::vector<uint8_t> toBytes(std::span<const float> probabilities);

}  // namespace vkgrad::vae
