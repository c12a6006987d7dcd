// A variational autoencoder (VAE) on the graph, as the lecture notes build it: an encoder MLP
// to a mean mu and a log standard deviation log_sigma per latent dimension, a sample
// z = mu + sigma * eps (eps ~ N(0, I) drawn on the device, graph::reparameterize), a decoder
// MLP to one logit per pixel (its sigmoid is the image), and the loss
//   reconstruction + beta * KL(N(mu, sigma^2) || N(0, I)),
// both terms per image in nats (summed over pixels and latent dimensions, averaged over the
// batch), each its own fused node so the two can be reported apart.
//
// Images live on the device as u8 pixels, 4 per u32 word (vit::uploadImages), gathered per
// batch and turned into [0, 1] floats on the device (graph::bytesToFloat).
//
// Parameter names: enc<i>.{w,b} for the encoder's hidden layers, mu.{w,b}, log_sigma.{w,b},
// dec<i>.{w,b} for the decoder's (the encoder's widths in reverse), out.{w,b}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vkgrad/ops/vae_loss.h"
#include "vkgrad/training/trainer.h"

namespace vkgrad::vae {

struct VaeConfig {
  int64_t image = 28;                   // height and width of the square grey images
  std::vector<int64_t> hidden = {400};  // the encoder's hidden widths; the decoder mirrors them
  int64_t latent = 20;
  ops::Reconstruction recon = ops::Reconstruction::Bce;
  float beta = 1.0f;  // the KL term's weight (beta-VAE); 1 is the ELBO

  // Throws Error naming the bad field.
  void validate() const;
  int64_t pixels() const { return image * image; }
};

// "bce" / "mse" and back; reconstructionFromName throws Error for anything else.
const char* reconstructionName(ops::Reconstruction kind);
ops::Reconstruction reconstructionFromName(const std::string& name);
// "512,256" -> {512, 256}; throws Error unless 1 to 8 positive widths up to 65536.
std::vector<int64_t> parseWidths(const std::string& text);
std::string widthsText(const std::vector<int64_t>& widths);  // {512, 256} -> "512,256"

// Adds every parameter, initialised as PyTorch's nn.Linear is by default: weights and biases
// uniform in +-1/sqrt(fan_in). Call store.initialize(seed) afterwards.
void declareVae(graph::ParameterStore& store, const VaeConfig& config);

// words (B, pixels/4) u32, packed bytes -> (B, pixels) f32 in [0, 1].
graph::Tensor vaePixels(graph::Graph& g, const VaeConfig& config, graph::Tensor words);

struct Encoded {
  graph::Tensor mu, log_sigma;  // (B, latent) each
};
// x (B, pixels) f32 -> the approximate posterior's parameters.
Encoded vaeEncode(graph::Graph& g, const graph::ParameterStore& store, const VaeConfig& config,
                  graph::Tensor x);
// z (B, latent) -> (B, pixels) logits; sigmoid of them is the decoded image.
graph::Tensor vaeDecode(graph::Graph& g, const graph::ParameterStore& store,
                        const VaeConfig& config, graph::Tensor z);

struct VaeTerms {
  graph::Tensor recon, kl,
      loss;  // (1) each: per image, mean over the batch; loss = recon + beta kl
};
// The loss of a batch of packed images; z is drawn (training and evaluation graphs alike).
VaeTerms vaeLoss(graph::Graph& g, const graph::ParameterStore& store, const VaeConfig& config,
                 graph::Tensor words);
// A Trainer loss over one dataset of packed images; marks recon and kl as the step's metrics
// (Trainer::metrics(), in that order). The store and config must outlive the Trainer.
graph::LossFn vaeLossFn(const graph::ParameterStore& store, const VaeConfig& config);

}  // namespace vkgrad::vae
