// models/vae: a small VAE trained for a few hundred steps on part of Fashion-MNIST
// reconstructs held-out test images far better than the mean training image does, with a
// finite, positive KL term; the evaluator's device totals agree with per-batch losses;
// the encoder and decoder run the same weights; bad configurations and checkpoint configs
// are rejected with errors that say what is wrong.
#include "vkgrad/vae/vae.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/data/idx.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vae/checkpoint.h"
#include "vkgrad/vae/codec.h"
#include "vkgrad/vit/vit.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using vae::VaeConfig;

VaeConfig small() {
  VaeConfig c;
  c.hidden = {128};
  c.latent = 8;
  return c;
}

void expectError(const std::function<void()>& f, const std::string& text) {
  try {
    f();
    ADD_FAILURE() << "accepted; expected: " << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
  }
}

TEST(VaeConfigTest, RejectsWhatCannotBeBuilt) {
  VaeConfig c = small();
  c.latent = 0;
  expectError([&] { c.validate(); }, "latent 0 is not in [1, 4096]");
  c = small();
  c.hidden = {};
  expectError([&] { c.validate(); }, "hidden must list 1 to 8 widths");
  c = small();
  c.beta = -1;
  expectError([&] { c.validate(); }, "beta must be finite and non-negative");
  c = small();
  c.image = 27;  // 729 pixels: not whole words of 4
  expectError([&] { c.validate(); }, "multiple of 4 pixels");
  EXPECT_NO_THROW(small().validate());

  EXPECT_EQ(vae::parseWidths("512,256"), (std::vector<int64_t>{512, 256}));
  EXPECT_EQ(vae::widthsText({512, 256}), "512,256");
  expectError([] { vae::parseWidths("400,"); }, "'' is not a width");
  expectError([] { vae::parseWidths("4x"); }, "'4x' is not a width");
  expectError([] { vae::parseWidths("0"); }, "'0' is not a width");
  expectError([] { vae::parseWidths("1,1,1,1,1,1,1,1,1"); }, "at most 8 layers");
  EXPECT_EQ(vae::reconstructionFromName("mse"), ops::Reconstruction::Mse);
  expectError([] { vae::reconstructionFromName("l1"); }, "unknown reconstruction loss 'l1'");
}

TEST(VaeCheckpointTest, ConfigRoundTripsAndBadFilesNameTheProblem) {
  const fs::path dir =
      fs::temp_directory_path() / ("vkgrad-vae-cp-" + std::to_string(Rng().seed()));
  fs::create_directories(dir);
  vae::VaeCheckpoint cp{small()};
  cp.config.hidden = {300, 100};
  cp.config.recon = ops::Reconstruction::Mse;
  cp.config.beta = 4.0f;
  vae::writeConfig(dir, cp);
  const vae::VaeCheckpoint back = vae::readConfig(dir);
  EXPECT_EQ(back.config.hidden, cp.config.hidden);
  EXPECT_EQ(back.config.latent, 8);
  EXPECT_EQ(back.config.recon, ops::Reconstruction::Mse);
  EXPECT_EQ(back.config.beta, 4.0f);

  auto bad = [&](const std::string& text, const std::string& want) {
    std::ofstream(dir / vae::kConfigFile) << text;
    expectError([&] { vae::readConfig(dir); }, want);
    expectError([&] { vae::readConfig(dir); }, "config.json");
  };
  bad("{\"format\": \"vkgrad-vae\", ", "invalid JSON");
  bad("{\"format\": \"vkgrad-vit\", \"version\": 1}", "format is not \"vkgrad-vae\"");
  graph::Json root = {
      {"format", "vkgrad-vae"},
      {"version", 1},
      {"model",
       {{"image", 28}, {"hidden", {400}}, {"latent", 20}, {"recon", "bce"}, {"beta", 1.0}}}};
  root["model"]["hidden"] = graph::Json::array();
  bad(graph::dumpJson(root), "\"hidden\" must be an array of 1 to 8 widths");
  root["model"]["hidden"] = {400, 0};
  bad(graph::dumpJson(root), "hidden width 0 is not in [1, 65536]");
  root["model"]["hidden"] = {400};
  root["model"]["recon"] = "huber";
  bad(graph::dumpJson(root), "unknown reconstruction loss 'huber'");
  root["model"]["recon"] = "bce";
  root["model"].erase("latent");
  bad(graph::dumpJson(root), "missing \"latent\"");
  fs::remove_all(dir);
  EXPECT_THROW(vae::readConfig(dir), Error);
}

class VaeTest : public VkTest {};

// The per-image squared error of predicting every test image by the mean training image:
// what a model that learned nothing about individual images would reconstruct.
double meanImageSquaredError(const data::ImageDataset& set, int64_t train_rows, int64_t test_rows) {
  const size_t image = 28 * 28;
  std::vector<double> mean(image, 0.0);
  for (int64_t i = 0; i < train_rows; ++i)
    for (size_t p = 0; p < image; ++p)
      mean[p] += set.train_images.pixels[size_t(i) * image + p] / 255.0;
  for (double& m : mean) m /= double(train_rows);
  double error = 0;
  for (int64_t i = 0; i < test_rows; ++i)
    for (size_t p = 0; p < image; ++p) {
      const double d = set.test_images.pixels[size_t(i) * image + p] / 255.0 - mean[p];
      error += d * d;
    }
  return error / double(test_rows);
}

// 6000 training images, 400 steps of 64 (4.3 epochs) of a 784-128-8 VAE with the squared-
// error loss, then 1000 test images. The mean training image reconstructs them with a squared
// error of 68.0 per image; such a VAE measured 24.7-25.4 here (lavapipe, seeds 1-3), so asking
// for half of the baseline leaves room for seeds while a model that learned nothing (it
// reconstructs the mean) fails.
TEST_F(VaeTest, SmallVaeReconstructsFarBetterThanTheMeanImage) {
  const data::ImageDataset set = data::loadFashionMnist(data::kFashionMnistDir);
  const int64_t train_rows = 6000, test_rows = 1000, image = 28 * 28;
  VaeConfig config = small();
  config.recon = ops::Reconstruction::Mse;
  const graph::Dataset train_x = vit::uploadImages(
      ctx(), "train.x", std::span(set.train_images.pixels).first(size_t(train_rows * image)),
      train_rows, 28, 28);
  const graph::Dataset test_x = vit::uploadImages(
      ctx(), "test.x", std::span(set.test_images.pixels).first(size_t(test_rows * image)),
      test_rows, 28, 28);

  Rng rng;
  SCOPED_TRACE(rng.describe());
  graph::ParameterStore store(ctx());
  vae::declareVae(store, config);
  store.initialize(rng.seed());
  graph::TrainerOptions options;
  options.batch = 64;
  options.optimizer.adamw.weight_decay = 0.0f;
  options.schedule = graph::Schedule::constant(2e-3f);
  options.dropout_seed = rng.seed();
  graph::Trainer trainer(ctx(), store, {&train_x}, vae::vaeLossFn(store, config), options);
  std::vector<uint32_t> order(static_cast<size_t>(train_rows));
  std::iota(order.begin(), order.end(), 0u);
  const size_t per_epoch = size_t(train_rows / 64);
  for (size_t s = 0; s < 400; ++s) {
    if (s % per_epoch == 0)
      for (size_t i = order.size() - 1; i > 0; --i)
        std::swap(order[i], order[rng.below(uint32_t(i + 1))]);
    const auto loss =
        trainer.step(std::span<const uint32_t>(order).subspan(s % per_epoch * 64, 64), s == 399);
    if (loss) {  // the loss is recon + KL, the metrics those two terms
      ASSERT_EQ(trainer.metrics().size(), 2u);
      EXPECT_NEAR(*loss, trainer.metrics()[0] + trainer.metrics()[1], 1e-3f * *loss);
    }
  }
  const double baseline = meanImageSquaredError(set, train_rows, test_rows);
  EXPECT_GT(baseline, 30.0);  // sanity: the test images differ from their mean

  // 1000 rows in batches of 300: three passes and a tail of 100 on its own graph.
  vae::Evaluator evaluator(ctx(), store, config, test_x, 300, 7);
  const vae::VaeLoss test = evaluator.evaluate();
  std::printf("small VAE: test recon %.2f (mean image %.2f), KL %.2f\n", test.recon, baseline,
              test.kl);
  EXPECT_EQ(test.images, test_rows);
  EXPECT_LT(test.recon, 0.5 * baseline) << "the mean image gives " << baseline;
  EXPECT_TRUE(std::isfinite(test.kl));
  EXPECT_GT(test.kl, 1.0) << "a posterior equal to the prior carries no information";
  // A second evaluation draws other z: close, not equal, and its totals start from zero.
  const vae::VaeLoss again = evaluator.evaluate();
  EXPECT_EQ(again.images, test_rows);
  EXPECT_NEAR(again.recon, test.recon, 0.05 * test.recon);
  EXPECT_NEAR(again.kl, test.kl, 1e-3 * test.kl);  // KL does not depend on z

  // The encoder's means decoded reconstruct at least as well as sampled z (on average).
  vae::Encoder encoder(ctx(), store, config, 128);
  vae::Decoder decoder(ctx(), store, config, 100);
  const std::span<const uint8_t> pixels =
      std::span(set.test_images.pixels).first(size_t(test_rows * image));
  const std::vector<float> mu = encoder.means(pixels);
  ASSERT_EQ(mu.size(), size_t(test_rows * config.latent));
  const std::vector<float> decoded = decoder.decode(mu);
  ASSERT_EQ(decoded.size(), size_t(test_rows * image));
  double error = 0;
  for (size_t i = 0; i < decoded.size(); ++i) {
    ASSERT_TRUE(decoded[i] >= 0.0f && decoded[i] <= 1.0f) << decoded[i];
    const double d = pixels[i] / 255.0 - decoded[i];
    error += d * d;
  }
  EXPECT_LT(error / double(test_rows), test.recon * 1.02);
}

}  // namespace
}  // namespace vkgrad::test
