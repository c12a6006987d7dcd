// vkgrad-vae as a user runs it, with validation on: train writes the checkpoint, the
// pictures for its latent size and a JSON line with both loss terms; sample and reconstruct
// read the checkpoint back and write PNGs; bad input (a bad --hidden or --recon, a missing
// data folder, a checkpoint whose weights do not match its config, a file that is not an
// image) fails with a clear message and the documented exit code, writing nothing.
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include <stb_image.h>
#include <stb_image_write.h>

#include "apps/run_app.h"
#include "common/temp_dir.h"
#include "vkgrad/data/idx.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

class VaeApp : public TempDirTest {
 protected:
  // A small model on 3072 training images, one epoch: a few seconds.
  AppRun train(const fs::path& out, const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args{"train", "--out", out.string(), "--limit", "3072"};
    for (const char* a :
         {"--epochs", "1", "--batch", "64", "--hidden", "64", "--validation", "--json"})
      args.push_back(a);
    args.insert(args.end(), extra.begin(), extra.end());
    return runApp("vae", args);
  }
};

// The size of a PNG, or {0, 0} when it does not decode.
std::pair<int, int> pngSize(const fs::path& path) {
  int w = 0, h = 0, n = 0;
  if (!stbi_info(path.string().c_str(), &w, &h, &n)) return {0, 0};
  return {w, h};
}

// Three epochs in one go, and one + --resume two: the same weights, bit for bit
// (run_app.h's expectResumeIsBitForBit).
TEST_F(VaeApp, ResumeContinuesARunBitForBit) {
  expectResumeIsBitForBit(
      "vae",
      [&](const std::string& out, const std::vector<std::string>& extra) {
        return train(out, extra);
      },
      dir_.string(), {"--limit", "512", "--epochs", "3"}, "epoch", 1, 3, {"--seed", "99"},
      "--seed 99 differs from the resumed run's 1");
}

TEST_F(VaeApp, TrainWritesCheckpointPicturesAndBothLossTerms) {
  const fs::path out = dir_ / "ckpt";
  const AppRun run = train(out, {"--latent", "2"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::is_regular_file(out / "model.safetensors"));
  EXPECT_TRUE(fs::is_regular_file(out / "config.json"));
  for (const char* png :
       {"curves.png", "reconstructions.png", "samples.png", "latent.png", "manifold.png"})
    EXPECT_GT(pngSize(out / png).first, 0) << png;
  EXPECT_FALSE(fs::exists(out / "interpolation.png"));  // for larger latents only
  EXPECT_TRUE(contains(run.err, "epoch 1/1")) << run.err;
  EXPECT_TRUE(contains(run.err, "recon")) << run.err;
  const graph::Json result = lastJsonLine(run.out);
  EXPECT_EQ(result["command"], "train");
  const graph::Json& test = result["test"];
  EXPECT_EQ(test["images"], 10000);
  const double recon = test["recon"].get<double>(), kl = test["kl"].get<double>();
  // Bernoulli cross-entropy of 784 pixels: a model that learned nothing is near 784 ln 2 = 543
  // at the start; one epoch on 3072 images measured 361 here (seed 1).
  EXPECT_GT(recon, 100.0);
  EXPECT_LT(recon, 450.0);
  EXPECT_GT(kl, 0.0);
  EXPECT_NEAR(test["neg_elbo"].get<double>(), recon + kl, 1e-6 * (recon + kl));
  ASSERT_EQ(result["history"].size(), 1u);

  const fs::path samples = dir_ / "s.png";
  const AppRun sample = runApp("vae", {"sample", "--checkpoint", out.string(), "--count", "12",
                                       "--out", samples.string(), "--validation"});
  ASSERT_EQ(sample.exit_code, 0) << sample.err;
  EXPECT_GT(pngSize(samples).first, 0);

  // Two test images as PNGs, one of them four times larger (area-resampled back to 28x28).
  const data::ImageDataset set = data::loadFashionMnist(data::kFashionMnistDir);
  std::vector<unsigned char> big(112 * 112);
  for (int y = 0; y < 112; ++y)
    for (int x = 0; x < 112; ++x)
      big[size_t(y * 112 + x)] = set.test_images.pixels[size_t(784 + (y / 4) * 28 + x / 4)];
  const std::string a = (dir_ / "a.png").string(), b = (dir_ / "b.png").string();
  ASSERT_TRUE(stbi_write_png(a.c_str(), 28, 28, 1, set.test_images.pixels.data(), 28));
  ASSERT_TRUE(stbi_write_png(b.c_str(), 112, 112, 1, big.data(), 112));
  const fs::path recons = dir_ / "r.png";
  const AppRun rec = runApp("vae", {"reconstruct", "--checkpoint", out.string(), a, b, "--out",
                                    recons.string(), "--validation"});
  ASSERT_EQ(rec.exit_code, 0) << rec.err;
  EXPECT_GT(pngSize(recons).first, 0);

  // Not an image; no image at all; no --out; weights that do not match the config.
  std::ofstream(dir_ / "notes.png") << "not a picture";
  const fs::path never = dir_ / "never.png";
  const AppRun bad = runApp("vae", {"reconstruct", "--checkpoint", out.string(),
                                    (dir_ / "notes.png").string(), "--out", never.string()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_TRUE(contains(bad.err, "notes.png: not an image")) << bad.err;
  EXPECT_EQ(runApp("vae", {"reconstruct", "--checkpoint", out.string(), "--out", never.string()})
                .exit_code,
            2);
  EXPECT_EQ(runApp("vae", {"sample", "--checkpoint", out.string()}).exit_code, 2);
  // Files edited by hand from here: without its manifest a folder is read as it is.
  fs::remove(out / "manifest.json");
  graph::Json config = graph::readJsonFile(out / "config.json");
  config["model"]["latent"] = 3;
  std::ofstream(out / "config.json") << graph::dumpJson(config);
  const AppRun mismatch =
      runApp("vae", {"sample", "--checkpoint", out.string(), "--out", never.string()});
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_TRUE(contains(mismatch.err, "model.safetensors")) << mismatch.err;
  EXPECT_FALSE(fs::exists(never));
}

TEST_F(VaeApp, LargerLatentsGetInterpolationsAndMseWorks) {
  const fs::path out = dir_ / "mse";
  const AppRun run =
      train(out, {"--latent", "5", "--recon", "mse", "--hidden", "48,24", "--profile"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(contains(run.out, "GPU time of the last training step by op")) << run.out;
  EXPECT_TRUE(contains(run.out, "reconstructionLoss")) << run.out;
  EXPECT_GT(pngSize(out / "interpolation.png").first, 0);
  EXPECT_FALSE(fs::exists(out / "latent.png"));
  const graph::Json result = lastJsonLine(run.out);
  // Squared error summed over 784 pixels in [0, 1]: the mean image gives ~47; below 784.
  const double recon = result["test"]["recon"].get<double>();
  EXPECT_GT(recon, 5.0);
  EXPECT_LT(recon, 80.0);
  const graph::Json config = graph::readJsonFile(out / "config.json");
  EXPECT_EQ(config["model"]["recon"], "mse");
  EXPECT_EQ(config["model"]["hidden"], graph::Json({48, 24}));
}

TEST_F(VaeApp, BadOptionsAndMissingDataAreClearErrors) {
  const AppRun hidden = train(dir_ / "h", {"--hidden", "400,x"});
  EXPECT_EQ(hidden.exit_code, 2);
  EXPECT_TRUE(contains(hidden.err, "'x' is not a width")) << hidden.err;
  const AppRun recon = train(dir_ / "r", {"--recon", "l1"});
  EXPECT_EQ(recon.exit_code, 2);
  EXPECT_TRUE(contains(recon.err, "unknown reconstruction loss 'l1'")) << recon.err;
  const AppRun beta = train(dir_ / "b", {"--beta", "-1"});
  EXPECT_EQ(beta.exit_code, 2);
  const AppRun data = train(dir_ / "d", {"--data", (dir_ / "nowhere").string()});
  EXPECT_EQ(data.exit_code, 1);
  EXPECT_TRUE(contains(data.err, "nowhere")) << data.err;
  EXPECT_FALSE(fs::exists(dir_ / "d" / "model.safetensors"));
  const AppRun missing =
      runApp("vae", {"sample", "--checkpoint", (dir_ / "none").string(), "--out", "x.png"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(contains(missing.err, "no such checkpoint directory")) << missing.err;
  EXPECT_EQ(runApp("vae", {"frobnicate"}).exit_code, 2);
  const AppRun help = runApp("vae", {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(contains(help.out, "vkgrad-vae train")) << help.out;
  const AppRun train_help = runApp("vae", {"train", "--help"});
  EXPECT_EQ(train_help.exit_code, 0);
  EXPECT_TRUE(contains(train_help.out, "--latent")) << train_help.out;
}

}  // namespace
}  // namespace vkgrad::test
