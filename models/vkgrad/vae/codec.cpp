#include "vkgrad/vae/codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "vkgrad/core/error.h"

namespace vkgrad::vae {

using graph::Tensor;

// A forward graph over `batch` gathered rows whose two loss terms are summed on the device.
struct Evaluator::Pass {
  int64_t batch = 0, steps = 0;  // steps since the totals were zeroed
  graph::Graph g;
  Tensor indices, recon_total, kl_total;
  std::unique_ptr<graph::Executor> exec;
  std::vector<uint32_t> ids;
};

Evaluator::Evaluator(vk::Context& context, const graph::ParameterStore& store,
                     const VaeConfig& config, const graph::Dataset& images, int64_t batch,
                     uint64_t seed)
    : context_(context),
      store_(store),
      config_(config),
      images_(images),
      batch_(batch),
      rows_(images.shape[0]),
      seed_(seed) {
  config_.validate();
  if (images.shape.rank() != 2 || images.shape[1] * 4 != config_.pixels())
    throw Error("vae::Evaluator: images " + images.shape.str() + " are not packed " +
                std::to_string(config_.image) + "x" + std::to_string(config_.image) + " images");
  if (batch <= 0) throw Error("vae::Evaluator: the batch must be positive");
  batch_ = std::min(batch_, rows_);
  full_ = build(batch_);
  if (rows_ % batch_) tail_ = build(rows_ % batch_);
}

Evaluator::~Evaluator() = default;

std::unique_ptr<Evaluator::Pass> Evaluator::build(int64_t batch) const {
  auto p = std::make_unique<Pass>();
  p->batch = batch;
  graph::Graph& g = p->g;
  g.setTraining(false);
  g.setSeed(seed_ + uint64_t(batch));  // the two passes draw apart
  p->indices = g.input("indices", {batch}, ops::DType::U32);
  const VaeTerms t = vaeLoss(g, store_, config_, g.gather(g.dataset(images_), p->indices));
  p->recon_total = g.input("recon.total", {1});
  p->kl_total = g.input("kl.total", {1});
  g.runningTotal(t.recon, p->recon_total);
  g.runningTotal(t.kl, p->kl_total);
  p->exec = std::make_unique<graph::Executor>(context_, g);
  p->ids.resize(size_t(batch));
  return p;
}

void Evaluator::run(Pass& pass, int64_t first) {
  if (pass.steps == 0) {
    const float zero = 0.0f;
    pass.exec->setInput(pass.recon_total, std::span(&zero, 1));
    pass.exec->setInput(pass.kl_total, std::span(&zero, 1));
  }
  std::iota(pass.ids.begin(), pass.ids.end(), uint32_t(first));
  pass.exec->setInput(pass.indices, pass.ids);
  pass.exec->step();
  ++pass.steps;
}

VaeLoss Evaluator::evaluate() {
  int64_t first = 0;
  for (; first + batch_ <= rows_; first += batch_) run(*full_, first);
  if (tail_) run(*tail_, first);
  // The totals hold sums of per-batch means: weight each pass by its batch size.
  VaeLoss loss;
  for (Pass* pass : {full_.get(), tail_.get()}) {
    if (!pass || pass->steps == 0) continue;
    loss.recon += double(pass->exec->readScalar(pass->recon_total)) * double(pass->batch);
    loss.kl += double(pass->exec->readScalar(pass->kl_total)) * double(pass->batch);
    loss.images += pass->steps * pass->batch;
    pass->steps = 0;
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
