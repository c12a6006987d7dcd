// vkgrad-vae: trains a variational autoencoder on Fashion-MNIST (or any IDX image set) on the
// device, draws what it learned, samples new images and reconstructs PNG images. The model,
// its evaluation and checkpoints live in models/vae; this program parses options, reports
// progress and writes the pictures.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/device_options.h"
#include "common/figures.h"
#include "common/image_file.h"
#include "common/plot.h"
#include "common/resume.h"
#include "common/training_run.h"
#include "vae/options.h"
#include "vae/pictures.h"
#include "vkgrad/data/idx.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vae/checkpoint.h"
#include "vkgrad/vae/codec.h"
#include "vkgrad/vae/vae.h"
#include "vkgrad/vit/vit.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

void loadModel(const fs::path& dir, const vae::VaeConfig& config, graph::ParameterStore& store) {
  vae::declareVae(store, config);
  store.load(dir / vae::kModelFile);
}

graph::Json lossJson(const vae::VaeLoss& l) {
  return {{"recon", l.recon}, {"kl", l.kl}, {"neg_elbo", l.elbo()}, {"images", l.images}};
}

// The test loss after each evaluation: the curves, the --json history and the log line.
struct TestRecord {
  Series recon{"test reconstruction", {}, {}, {44, 160, 44}, true};
  Series kl{"test KL", {}, {}, {214, 39, 40}, true};
  vae::VaeLoss last;
  graph::Json history = graph::Json::array();

  std::string add(int64_t epoch, const vae::VaeLoss& test, const TrainStats& train) {
    last = test;
    for (auto [s, v] : {std::pair{&recon, test.recon}, {&kl, test.kl}}) {
      s->x.push_back(double(epoch));
      s->y.push_back(v);
    }
    history.push_back({{"epoch", epoch},
                       {"train_recon", train.metrics.at(0)},
                       {"train_kl", train.metrics.at(1)},
                       {"test", lossJson(test)}});
    char text[96];
    std::snprintf(text, sizeof text, "test recon %.2f KL %.2f -ELBO %.2f", test.recon, test.kl,
                  test.elbo());
    return text;
  }
};

// The options that define a training run besides the shared ones (common/training_run.h).
const std::vector<const char*> kFixed{"data", "hidden", "latent", "recon",
                                      "beta", "batch",  "limit"};

// The shared options' defaults (common/training_run.h).
const RunDefaults kDefaults{.program = "vkgrad-vae", .rows = Rows::Shuffled, .out = "vae-out"};

int train(int argc, char** argv) {
  Cli cli("vkgrad-vae train",
          "Trains a variational autoencoder on Fashion-MNIST (or the IDX files in --data) and\n"
          "writes DIR/model.safetensors, DIR/config.json, DIR/curves.png,\n"
          "DIR/reconstructions.png, DIR/samples.png, and for --latent 2 DIR/latent.png and\n"
          "DIR/manifold.png, otherwise DIR/interpolation.png. Losses are per image, in nats:\n"
          "the reconstruction term (summed over pixels) and the KL term to N(0, I).\n"
          "DIR/train_state.safetensors is saved after every epoch (what --resume continues from).");
  cli.positional("train", "the command");
  declareModelOptions(cli);
  TrainingRun run(cli, kDefaults);
  cli.parse(argc, argv);
  run.parsed(kFixed);

  const vae::VaeConfig config = configFromCli(cli);
  const int64_t batch = cli.getInt("batch", 1, 1 << 16);
  const int64_t limit = cli.getInt("limit", 0, int64_t(1) << 40);
  const data::ImageDataset set = data::loadImageSet(cli.get("data"), config.image, limit);
  const int64_t train_rows = set.train_images.count;

  vk::Context& context = run.device();
  const graph::Dataset train_x = vit::uploadImages(context, "train.images", set.train_images.pixels,
                                                   train_rows, config.image, config.image);
  const graph::Dataset test_x =
      vit::uploadImages(context, "test.images", set.test_images.pixels, set.test_images.count,
                        config.image, config.image);
  graph::ParameterStore store(context);
  vae::declareVae(store, config);
  store.initialize(run.seed());
  // The seed also draws eps: TrainerOptions::dropout_seed is the graph's generator.
  graph::Trainer trainer(context, store, {&train_x}, vae::vaeLossFn(store, config),
                         run.trainerOptions(batch, train_rows));
  vae::Evaluator evaluator(context, store, config, test_x, 500, run.seed() ^ 0x5eedULL);
  printHeader(context, cli.get("data"), set, store, config);

  TestRecord test;
  RunHooks hooks;
  hooks.data = fingerprint(set.train_images.pixels);
  hooks.items = "images";
  hooks.items_per_step = batch;
  hooks.rate_key = "train_images_per_s";
  hooks.metrics = {"reconstruction", "KL"};
  hooks.plot_loss = false;
  hooks.curves = {&test.recon, &test.kl};
  hooks.plot = {.title = "vkgrad-vae: loss terms per image (nats)",
                .x_label = "epoch",
                .y_label = "nats per image",
                .log_y = true};
  hooks.evaluate = [&](int64_t epoch, const TrainStats& train) {
    return test.add(epoch, evaluator.evaluate(), train);
  };
  hooks.save = [&](const fs::path& dir, int64_t epoch) {
    store.save(dir / vae::kModelFile, {}, run.modelDtype());
    vae::VaeCheckpoint cp{config};
    cp.training = {{"data", cli.get("data")}, {"train_images", train_rows},
                   {"epochs", run.units()},   {"epochs_done", epoch},
                   {"batch", batch},          {"lr", run.peakLr()},
                   {"seed", run.seed()},      {"test", lossJson(test.last)}};
    vae::writeConfig(dir, cp);
    return std::vector<std::string>{vae::kModelFile, vae::kConfigFile};
  };
  hooks.finish = [&](graph::Json& json) {
    const vae::VaeLoss& l = test.last;
    std::printf("test: reconstruction %.2f + KL %.2f = -ELBO %.2f nats per image\n", l.recon, l.kl,
                l.elbo());
    json["test"] = lossJson(l);
    json["history"] = test.history;
    json["eval_images_per_s"] =
        double(run.evaluations() * set.test_images.count) / run.evalSeconds();
    return writePictures(run.out(), context, store, config, set.test_images, set.test_labels,
                         classNames(cli.get("data")), run.seed());
  };
  return run.train(trainer, hooks);
}

int sample(int argc, char** argv) {
  Cli cli("vkgrad-vae sample",
          "Decodes points drawn from N(0, I) with a checkpoint that vkgrad-vae train wrote\n"
          "and writes them as one PNG grid.");
  cli.positional("sample", "the command");
  cli.option("checkpoint", "checkpoint directory (required)");
  cli.option("count", "images to draw", "64");
  cli.option("out", "the PNG to write (required)");
  cli.option("seed", "the draw's seed", "1");
  declareDeviceOptions(cli);
  cli.parse(argc, argv);
  if (cli.get("checkpoint").empty()) cli.fail("--checkpoint is required");
  if (cli.get("out").empty()) cli.fail("--out FILE.png is required");
  const int64_t count = cli.getInt("count", 1, 10000);
  const fs::path dir = cli.get("checkpoint");
  const vae::VaeCheckpoint cp = vae::readConfig(dir);
  vk::Context context(contextOptions(cli));
  graph::ParameterStore store(context);
  loadModel(dir, cp.config, store);
  vae::Decoder decoder(context, store, cp.config, std::min<int64_t>(count, 256));
  const std::vector<uint8_t> images = vae::toBytes(decoder.decode(
      normalPoints(count, cp.config.latent, uint64_t(cli.getInt("seed", 0, INT64_MAX)))));
  const int side = int(cp.config.image);
  writeImageGridPng(cli.get("out"), tiles(images, size_t(cp.config.pixels())), side, side,
                    int(std::min<int64_t>(count, 10)), 3,
                    "vkgrad-vae: " + std::to_string(count) + " decoded z ~ N(0, I)");
  std::printf("wrote %s (%lld samples)\n", cli.get("out").c_str(), static_cast<long long>(count));
  return validationFailed(context, "vkgrad-vae") ? 1 : 0;
}

int reconstruct(int argc, char** argv) {
  Cli cli("vkgrad-vae reconstruct",
          "Encodes PNG images to their posterior means and decodes them with a checkpoint;\n"
          "writes each image over its reconstruction. Images are read as grey and resized to\n"
          "the model's size (as vkgrad-vit predict does). Fashion-MNIST shows light clothes on\n"
          "black: pass --invert for dark objects on a light background.");
  cli.positional("reconstruct", "the command");
  cli.positional("IMAGE...", "the images to reconstruct");
  cli.option("checkpoint", "checkpoint directory (required)");
  cli.option("out", "the PNG to write (required)");
  cli.flag("invert", "invert the grey values first (dark object on a light background)");
  declareDeviceOptions(cli);
  cli.parse(argc, argv);
  const std::vector<std::string>& args = cli.positionals();
  if (cli.get("checkpoint").empty()) cli.fail("--checkpoint is required");
  if (cli.get("out").empty()) cli.fail("--out FILE.png is required");
  if (args.size() < 2) cli.fail("name at least one image after the options");
  const fs::path dir = cli.get("checkpoint");
  const vae::VaeCheckpoint cp = vae::readConfig(dir);
  const std::vector<uint8_t> pixels = readGreyImages(
      std::span(args).subspan(1), int(cp.config.image), cli.has("invert"));  // args[0]: command
  vk::Context context(contextOptions(cli));
  graph::ParameterStore store(context);
  loadModel(dir, cp.config, store);
  const int64_t count = int64_t(args.size() - 1);
  vae::Encoder encoder(context, store, cp.config, std::min<int64_t>(count, 64));
  vae::Decoder decoder(context, store, cp.config, std::min<int64_t>(count, 64));
  const std::vector<uint8_t> recon = vae::toBytes(decoder.decode(encoder.means(pixels)));
  const size_t image = size_t(cp.config.pixels());
  std::vector<GridImage> grid;
  for (size_t i = 0; i < size_t(count); ++i) {
    grid.push_back({std::span(pixels).subspan(i * image, image),
                    fs::path(args[i + 1]).filename().string(), false});
    grid.push_back({std::span(recon).subspan(i * image, image), "decoded", false});
  }
  const int side = int(cp.config.image);
  writeImageGridPng(cli.get("out"), grid, side, side, 2, 4,
                    "vkgrad-vae: images (left) and reconstructions");
  std::printf("wrote %s (%lld images)\n", cli.get("out").c_str(), static_cast<long long>(count));
  return validationFailed(context, "vkgrad-vae") ? 1 : 0;
}

const char* const kUsage =
    "usage: vkgrad-vae train [options]      train, write a checkpoint and pictures\n"
    "       vkgrad-vae sample --checkpoint DIR --count N --out FILE.png [--seed S]\n"
    "       vkgrad-vae reconstruct --checkpoint DIR IMAGE.png... --out FILE.png\n"
    "Each command takes --help.\n";

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  using namespace vkgrad::apps;
  return commandMain(
      "vkgrad-vae",
      "vkgrad-vae: a variational autoencoder on Fashion-MNIST, trained on the device.", kUsage,
      {{"train", train}, {"sample", sample}, {"reconstruct", reconstruct}}, argc, argv);
}
