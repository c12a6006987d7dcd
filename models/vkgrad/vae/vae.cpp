#include "vkgrad/vae/vae.h"

#include <cmath>

#include "vkgrad/core/error.h"
#include "vkgrad/nn/layers.h"
#include "vkgrad/runtime/ops/bytes_to_float.h"
#include "vkgrad/runtime/ops/reparameterize.h"
#include "vkgrad/runtime/ops/vae_loss.h"
#include "vkgrad/runtime/parameters.h"

namespace vkgrad::vae {

using graph::Init;
using graph::Tensor;

void VaeConfig::validate() const {
  auto fail = [](const std::string& why) { throw Error("VaeConfig: " + why); };
  if (image <= 0 || image > 4096 || pixels() % 4 != 0)
    fail("image " + std::to_string(image) + " must be in [1, 4096] with a multiple of 4 pixels");
  if (hidden.empty() || hidden.size() > 8) fail("hidden must list 1 to 8 widths");
  for (const int64_t w : hidden)
    if (w <= 0 || w > 65536) fail("hidden width " + std::to_string(w) + " is not in [1, 65536]");
  if (latent <= 0 || latent > 4096)
    fail("latent " + std::to_string(latent) + " is not in [1, 4096]");
  if (!(beta >= 0.0f && std::isfinite(beta))) fail("beta must be finite and non-negative");
}

const char* reconstructionName(ops::Reconstruction kind) {
  return kind == ops::Reconstruction::Bce ? "bce" : "mse";
}

ops::Reconstruction reconstructionFromName(const std::string& name) {
  if (name == "bce") return ops::Reconstruction::Bce;
  if (name == "mse") return ops::Reconstruction::Mse;
  throw Error("unknown reconstruction loss '" + name + "' (bce or mse)");
}

std::vector<int64_t> parseWidths(const std::string& text) {
  std::vector<int64_t> widths;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    const std::string item = text.substr(begin, comma - begin);
    size_t used = 0;
    long long w = 0;
    try {
      w = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (item.empty() || used != item.size() || w <= 0 || w > 65536)
      throw Error("widths '" + text + "': '" + item + "' is not a width in [1, 65536]");
    widths.push_back(w);
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (widths.size() > 8) throw Error("widths '" + text + "': at most 8 layers");
  return widths;
}

std::string widthsText(const std::vector<int64_t>& widths) {
  std::string text;
  for (const int64_t w : widths) text += (text.empty() ? "" : ",") + std::to_string(w);
  return text;
}

namespace {

using graph::Graph;

// nn.Linear's default: U(-1/sqrt(in), 1/sqrt(in)) for the weights and the bias.
void declareDense(graph::ParameterStore& store, const std::string& name, int64_t in, int64_t out) {
  const float bound = 1.0f / std::sqrt(float(in));
  store.add(name + ".w", {in, out}, Init::uniform(-bound, bound));
  store.add(name + ".b", {out}, Init::uniform(-bound, bound));
}

// The hidden layers of one MLP: linear then ReLU each.
Tensor hiddenLayers(Graph& g, const graph::ParameterStore& store, const std::string& prefix,
                    size_t count, Tensor x) {
  for (size_t i = 0; i < count; ++i)
    x = g.relu(nn::linear(g, store, prefix + std::to_string(i), x));
  return x;
}

}  // namespace

void declareVae(graph::ParameterStore& store, const VaeConfig& config) {
  config.validate();
  int64_t in = config.pixels();
  for (size_t i = 0; i < config.hidden.size(); ++i) {
    declareDense(store, "enc" + std::to_string(i), in, config.hidden[i]);
    in = config.hidden[i];
  }
  declareDense(store, "mu", in, config.latent);
  declareDense(store, "log_sigma", in, config.latent);
  in = config.latent;
  for (size_t i = 0; i < config.hidden.size(); ++i) {
    const int64_t out = config.hidden[config.hidden.size() - 1 - i];
    declareDense(store, "dec" + std::to_string(i), in, out);
    in = out;
  }
  declareDense(store, "out", in, config.pixels());
}

Tensor vaePixels(graph::Graph& g, const VaeConfig& config, Tensor words) {
  const ops::Shape s = g.shape(words);
  if (s.rank() != 2 || s[1] * 4 != config.pixels())
    throw ShapeError(g.describe("vaePixels", {words}) + ": images must be (B, " +
                     std::to_string(config.pixels() / 4) + ") words of 4 pixels");
  return graph::bytesToFloat(g, words, {s[0], config.pixels()}, 1.0f / 255.0f);
}

Encoded vaeEncode(graph::Graph& g, const graph::ParameterStore& store, const VaeConfig& config,
                  Tensor x) {
  const Tensor h = hiddenLayers(g, store, "enc", config.hidden.size(), x);
  return {nn::linear(g, store, "mu", h), nn::linear(g, store, "log_sigma", h)};
}

Tensor vaeDecode(graph::Graph& g, const graph::ParameterStore& store, const VaeConfig& config,
                 Tensor z) {
  return nn::linear(g, store, "out", hiddenLayers(g, store, "dec", config.hidden.size(), z));
}

VaeTerms vaeLoss(graph::Graph& g, const graph::ParameterStore& store, const VaeConfig& config,
                 Tensor words) {
  const Tensor x = vaePixels(g, config, words);
  const Encoded e = vaeEncode(g, store, config, x);
  const Tensor logits = vaeDecode(g, store, config, graph::reparameterize(g, e.mu, e.log_sigma));
  VaeTerms t;
  t.recon = graph::reconstructionLoss(g, logits, x, config.recon);
  t.kl = graph::gaussianKl(g, e.mu, e.log_sigma);
  t.loss = config.beta == 1.0f
               ? g.add(t.recon, t.kl)
               : g.add(t.recon, g.mul(t.kl, g.constant("beta", {1}, {config.beta})));
  return t;
}

graph::LossFn vaeLossFn(const graph::ParameterStore& store, const VaeConfig& config) {
  return [&store, &config](graph::Graph& g, std::span<const Tensor> batch) {
    if (batch.size() != 1) throw Error("vaeLossFn: needs one dataset (packed images)");
    const VaeTerms t = vaeLoss(g, store, config, batch[0]);
    g.markOutput(t.recon);
    g.markOutput(t.kl);
    return t.loss;
  };
}

}  // namespace vkgrad::vae
