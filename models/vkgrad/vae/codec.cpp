#include "vkgrad/vae/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "vkgrad/core/error.h"

namespace vkgrad::vae {

using graph::Tensor;

Evaluator::Evaluator(vk::Context& context, const graph::ParameterStore& store,
                     const VaeConfig& config, const graph::Dataset& images, int64_t batch,
                     uint64_t seed) {
  config.validate();
  if (images.shape.rank() != 2 || images.shape[1] * 4 != config.pixels())
    throw Error("vae::Evaluator: images " + images.shape.str() + " are not packed " +
                std::to_string(config.image) + "x" + std::to_string(config.image) + " images");
  if (batch <= 0) throw Error("vae::Evaluator: the batch must be positive");
  // Each batch's two loss terms are added into device totals (outputs 0 and 1), zeroed by
  // evaluate() before a pass's first batch.
  sweep_ = std::make_unique<graph::Sweep>(
      context, images.shape[0], batch, [&](graph::Graph& g, Tensor indices) {
        g.setSeed(seed + uint64_t(g.tensor(indices).shape[0]));  // the two passes draw apart
        const VaeTerms t = vaeLoss(g, store, config, g.gather(g.dataset(images), indices));
        const Tensor recon_total = g.input("recon.total", {1}), kl_total = g.input("kl.total", {1});
        g.runningTotal(t.recon, recon_total);
        g.runningTotal(t.kl, kl_total);
        return std::vector<Tensor>{recon_total, kl_total};
      });
}

Evaluator::~Evaluator() = default;

VaeLoss Evaluator::evaluate() {
  for (graph::Sweep::Pass* pass : sweep_->passes()) pass->runs = 0;
  sweep_->run(
      [](graph::Sweep::Pass& pass) {
        if (pass.runs > 0) return;
        const float zero = 0.0f;
        for (const Tensor total : pass.outputs) pass.exec->setInput(total, std::span(&zero, 1));
      },
      {});
  // The totals hold sums of per-batch means: weight each pass by its batch size.
  VaeLoss loss;
  for (graph::Sweep::Pass* pass : sweep_->passes()) {
    if (pass->runs == 0) continue;
    loss.recon += double(pass->exec->readScalar(pass->outputs[0])) * double(pass->batch);
    loss.kl += double(pass->exec->readScalar(pass->outputs[1])) * double(pass->batch);
    loss.images += pass->runs * pass->batch;
  }
  loss.recon /= double(loss.images);
  loss.kl /= double(loss.images);
  return loss;
}

Encoder::Encoder(vk::Context& context, const graph::ParameterStore& store, const VaeConfig& config,
                 int64_t batch)
    : config_(config), batch_(batch) {
  config_.validate();
  if (batch <= 0) throw Error("vae::Encoder: the batch must be positive");
  g_.setTraining(false);
  words_ = g_.input("images", {batch, config_.pixels() / 4}, ops::DType::U32);
  mu_ = vaeEncode(g_, store, config_, vaePixels(g_, config_, words_)).mu;
  g_.markOutput(mu_);
  exec_ = std::make_unique<graph::Executor>(context, g_);
}

Encoder::~Encoder() = default;

std::vector<float> Encoder::means(std::span<const uint8_t> pixels) {
  const size_t image = size_t(config_.pixels());
  if (pixels.size() % image != 0)
    throw Error("vae::Encoder: " + std::to_string(pixels.size()) + " bytes are not whole " +
                std::to_string(config_.image) + "x" + std::to_string(config_.image) + " images");
  const size_t count = pixels.size() / image, latent = size_t(config_.latent);
  std::vector<float> out;
  out.reserve(count * latent);
  std::vector<uint32_t> words(size_t(batch_) * image / 4, 0);
  for (size_t first = 0; first < count; first += size_t(batch_)) {
    const size_t n = std::min(count - first, size_t(batch_));
    std::fill(words.begin(), words.end(), 0u);
    std::memcpy(words.data(), pixels.data() + first * image, n * image);
    exec_->setInput(words_, words);
    exec_->step();
    const std::vector<float> mu = exec_->read(mu_);
    out.insert(out.end(), mu.begin(), mu.begin() + std::ptrdiff_t(n * latent));
  }
  return out;
}

Decoder::Decoder(vk::Context& context, const graph::ParameterStore& store, const VaeConfig& config,
                 int64_t batch)
    : config_(config), batch_(batch) {
  config_.validate();
  if (batch <= 0) throw Error("vae::Decoder: the batch must be positive");
  g_.setTraining(false);
  z_ = g_.input("z", {batch, config_.latent});
  image_ = g_.activation(vaeDecode(g_, store, config_, z_), ops::Activation::Sigmoid);
  g_.markOutput(image_);
  exec_ = std::make_unique<graph::Executor>(context, g_);
}

Decoder::~Decoder() = default;

std::vector<float> Decoder::decode(std::span<const float> z) {
  const size_t latent = size_t(config_.latent), pixels = size_t(config_.pixels());
  if (z.size() % latent != 0)
    throw Error("vae::Decoder: " + std::to_string(z.size()) + " values are not whole points of " +
                std::to_string(latent) + " latent dimensions");
  const size_t count = z.size() / latent;
  std::vector<float> out;
  out.reserve(count * pixels);
  std::vector<float> batch(size_t(batch_) * latent, 0.0f);
  for (size_t first = 0; first < count; first += size_t(batch_)) {
    const size_t n = std::min(count - first, size_t(batch_));
    std::fill(batch.begin(), batch.end(), 0.0f);
    std::copy_n(z.begin() + std::ptrdiff_t(first * latent), n * latent, batch.begin());
    exec_->setInput(z_, batch);
    exec_->step();
    const std::vector<float> image = exec_->read(image_);
    out.insert(out.end(), image.begin(), image.begin() + std::ptrdiff_t(n * pixels));
  }
  return out;
}

std::vector<uint8_t> toBytes(std::span<const float> probabilities) {
  std::vector<uint8_t> bytes(probabilities.size());
  for (size_t i = 0; i < bytes.size(); ++i) {
    const float p = probabilities[i];
    bytes[i] = uint8_t(std::lround(std::clamp(std::isfinite(p) ? p : 0.0f, 0.0f, 1.0f) * 255.0f));
  }
  return bytes;
}

}  // namespace vkgrad::vae
