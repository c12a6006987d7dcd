// vkgrad-vae: trains a variational autoencoder on Fashion-MNIST (or any IDX image set) on the
// device, draws what it learned, samples new images and reconstructs PNG images. The model,
// its evaluation and checkpoints live in models/vae; this program parses options, reports
// progress and writes the pictures.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/device_options.h"
#include "common/figures.h"
#include "common/image_file.h"
#include "common/output_dir.h"
#include "common/plot.h"
#include "common/progress.h"
#include "common/resume.h"
#include "vkgrad/data/idx.h"
#include "vkgrad/graph/json_io.h"
#include "vkgrad/graph/parameters.h"
#include "vkgrad/graph/profile.h"
#include "vkgrad/graph/trainer.h"
#include "vkgrad/vae/checkpoint.h"
#include "vkgrad/vae/codec.h"
#include "vkgrad/vae/vae.h"
#include "vkgrad/vit/vit.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

vae::VaeConfig configFromCli(const Cli& cli) {
  vae::VaeConfig c;
  try {
    c.hidden = vae::parseWidths(cli.get("hidden"));
    c.recon = vae::reconstructionFromName(cli.get("recon"));
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  c.latent = cli.getInt("latent", 1, 4096);
  c.beta = float(cli.getDouble("beta", 0.0, 1e6));
  try {
    c.validate();
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  return c;
}

void loadModel(const fs::path& dir, const vae::VaeConfig& config, graph::ParameterStore& store) {
  vae::declareVae(store, config);
  store.load(dir / vae::kModelFile);
}

// count points of N(0, I) in `latent` dimensions.
std::vector<float> normalPoints(int64_t count, int64_t latent, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> z(size_t(count * latent));
  for (float& v : z) v = normal(rng);
  return z;
}

std::vector<GridImage> tiles(const std::vector<uint8_t>& pixels, size_t image) {
  std::vector<GridImage> grid;
  for (size_t i = 0; i + image <= pixels.size(); i += image)
    grid.push_back({std::span(pixels).subspan(i, image), "", false});
  return grid;
}

// The standard normal's quantile function, by bisection on its CDF (pictures only).
double normalQuantile(double p) {
  double lo = -10, hi = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// The pictures a trained model gets: reconstructions and samples always; for a 2-D latent
// the test set's means by class and the decoder's manifold, otherwise interpolations.
// Returns the names written.
std::vector<std::string> writePictures(const fs::path& out, vk::Context& context,
                                       const graph::ParameterStore& store,
                                       const vae::VaeConfig& config, const data::Images& images,
                                       std::span<const uint8_t> labels,
                                       const std::vector<std::string>& names, uint64_t seed) {
  const size_t image = size_t(config.pixels());
  const int side = int(config.image);
  vae::Encoder encoder(context, store, config, 500);
  vae::Decoder decoder(context, store, config, 256);
  std::vector<std::string> written;

  // Reconstructions from the posterior means: 4 pairs of rows, test images over their decodings.
  const int64_t shown = std::min<int64_t>(48, images.count), per_row = 12;
  const std::span<const uint8_t> first = std::span(images.pixels).first(size_t(shown) * image);
  const std::vector<uint8_t> recon = vae::toBytes(decoder.decode(encoder.means(first)));
  std::vector<GridImage> pairs;
  for (int64_t row = 0; row * per_row < shown; ++row) {
    const int64_t n = std::min(per_row, shown - row * per_row);
    for (int64_t i = row * per_row; i < row * per_row + n; ++i)
      pairs.push_back({first.subspan(size_t(i) * image, image),
                       names[labels[size_t(i)] % names.size()], false});
    for (int64_t i = row * per_row; i < row * per_row + n; ++i)
      pairs.push_back({std::span(recon).subspan(size_t(i) * image, image), "decoded", false});
  }
  writeImageGridPng(out / "reconstructions.png", pairs, side, side, int(per_row), 3,
                    "vkgrad-vae: test images (odd rows) and their reconstructions from mu");
  written.push_back("reconstructions.png");

  const std::vector<uint8_t> samples =
      vae::toBytes(decoder.decode(normalPoints(100, config.latent, seed)));
  writeImageGridPng(out / "samples.png", tiles(samples, image), side, side, 10, 3,
                    "vkgrad-vae: decoded z ~ N(0, I)");
  written.push_back("samples.png");

  if (config.latent == 2) {
    const std::vector<float> mu = encoder.means(images.pixels);
    std::vector<PointGroup> groups(names.size());
    for (size_t c = 0; c < names.size(); ++c) {
      groups[c].label = names[c];
      std::copy_n(categoricalColour(int(c)), 3, groups[c].rgb);
    }
    for (int64_t i = 0; i < images.count; ++i) {
      PointGroup& g = groups[labels[size_t(i)] % names.size()];
      g.x.push_back(mu[size_t(2 * i)]);
      g.y.push_back(mu[size_t(2 * i + 1)]);
    }
    PlotOptions plot;
    plot.title = "vkgrad-vae: test set means mu by class";
    plot.x_label = "z1";
    plot.y_label = "z2";
    plot.width = 900;
    plot.height = 720;
    writeScatterPlot(out / "latent.png", groups, plot);
    written.push_back("latent.png");

    // The decoder over a 20 x 20 grid of evenly spaced quantiles of N(0, 1) in each axis.
    const int n = 20;
    std::vector<float> grid;
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < n; ++c) {
        grid.push_back(float(normalQuantile((c + 0.5) / n)));
        grid.push_back(float(normalQuantile(1.0 - (r + 0.5) / n)));  // z2 grows upwards
      }
    const std::vector<uint8_t> manifold = vae::toBytes(decoder.decode(grid));
    writeImageGridPng(out / "manifold.png", tiles(manifold, image), side, side, n, 2,
                      "vkgrad-vae: the decoder over z1 (right) and z2 (up), quantiles 2.5-97.5%");
    written.push_back("manifold.png");
  } else {
    // Straight lines between the means of pairs of test images, 10 steps each.
    const int pairs_n = 8, steps = 10;
    const int64_t needed = std::min<int64_t>(2 * pairs_n, images.count);
    const std::vector<float> mu =
        encoder.means(std::span(images.pixels).first(size_t(needed) * image));
    std::vector<float> line;
    const size_t latent = size_t(config.latent);
    for (int p = 0; 2 * p + 1 < needed; ++p)
      for (int s = 0; s < steps; ++s) {
        const float t = float(s) / float(steps - 1);
        for (size_t j = 0; j < latent; ++j)
          line.push_back((1 - t) * mu[size_t(2 * p) * latent + j] +
                         t * mu[size_t(2 * p + 1) * latent + j]);
      }
    const std::vector<uint8_t> decoded = vae::toBytes(decoder.decode(line));
    writeImageGridPng(out / "interpolation.png", tiles(decoded, image), side, side, steps, 3,
                      "vkgrad-vae: decoded straight lines between two test images' means");
    written.push_back("interpolation.png");
  }
  return written;
}

graph::Json lossJson(const vae::VaeLoss& l) {
  return {{"recon", l.recon}, {"kl", l.kl}, {"neg_elbo", l.elbo()}, {"images", l.images}};
}

// The options that define a training run, and its rhythm (apps/common/resume.h).
const RunOptions kRun{{"data", "hidden", "latent", "recon", "beta", "batch", "lr", "seed", "limit"},
                      {"epochs"}};

int train(int argc, char** argv) {
  Cli cli("vkgrad-vae train",
          "Trains a variational autoencoder on Fashion-MNIST (or the IDX files in --data) and\n"
          "writes DIR/model.safetensors, DIR/config.json, DIR/curves.png,\n"
          "DIR/reconstructions.png, DIR/samples.png, and for --latent 2 DIR/latent.png and\n"
          "DIR/manifold.png, otherwise DIR/interpolation.png. Losses are per image, in nats:\n"
          "the reconstruction term (summed over pixels) and the KL term to N(0, I).\n"
          "DIR/train_state.safetensors is saved after every epoch (what --resume continues from).");
  cli.positional("train", "the command");
  cli.option("data", "folder of the IDX files (plain or .gz)", data::kFashionMnistDir);
  cli.option("out", "checkpoint directory (created if missing)", "vae-out");
  cli.option("hidden", "the encoder's hidden widths, comma-separated (the decoder mirrors them)",
             "400");
  cli.option("latent", "latent dimensions (2 draws the latent space and its manifold)", "20");
  cli.option("recon", "reconstruction loss: bce (Bernoulli cross-entropy) or mse (squared error)",
             "bce");
  cli.option("beta", "weight of the KL term (1: the ELBO; beta-VAE otherwise)", "1");
  cli.option("batch", "images per step", "128");
  cli.option("epochs", "passes over the training set", "10");
  cli.option("lr", "learning rate (Adam)", "1e-3");
  cli.option("seed", "initialisation, sampling and shuffling seed", "1");
  cli.option("limit", "train on the first N images only (0: all)", "0");
  declareDeviceOptions(cli);
  cli.flag("profile",
           "time every node of the training step and print the last step's GPU time by op "
           "(a timestamp per node)");
  cli.flag("json", "end with one JSON line of results");
  declareResumeOptions(cli, "epoch");
  cli.parse(argc, argv);
  std::optional<graph::Checkpoint> resumed = resumeRun(cli, kRun, "vkgrad-vae");

  const vae::VaeConfig config = configFromCli(cli);
  const int64_t batch = cli.getInt("batch", 1, 1 << 16);
  const int64_t epochs = cli.getInt("epochs", 1, 10000);
  const float lr = float(cli.getDouble("lr", 1e-8, 10.0));
  const uint64_t seed = uint64_t(cli.getInt("seed", 0, INT64_MAX));
  const int64_t limit = cli.getInt("limit", 0, int64_t(1) << 40);

  const data::ImageDataset set = data::loadImageSet(cli.get("data"), config.image, limit);
  const int64_t train_rows = set.train_images.count;
  if (train_rows < batch)
    cli.fail("--batch " + std::to_string(batch) + " is more than the " +
             std::to_string(train_rows) + " training images");
  const fs::path out = cli.get("out");
  prepareOutput(out);

  vk::Context context(contextOptions(cli));
  const graph::Dataset train_x = vit::uploadImages(context, "train.images", set.train_images.pixels,
                                                   train_rows, config.image, config.image);
  const graph::Dataset test_x =
      vit::uploadImages(context, "test.images", set.test_images.pixels, set.test_images.count,
                        config.image, config.image);

  graph::ParameterStore store(context);
  vae::declareVae(store, config);
  store.initialize(seed);
  const int64_t steps_per_epoch = train_rows / batch;
  graph::TrainerOptions options;
  options.batch = batch;
  options.optimizer.adamw.weight_decay = 0.0f;  // Adam
  options.dropout_seed = seed;                  // the generator that draws eps
  options.schedule = graph::Schedule::constant(lr);
  options.profile = cli.has("profile");
  graph::Trainer trainer(context, store, {&train_x}, vae::vaeLossFn(store, config), options);
  vae::Evaluator evaluator(context, store, config, test_x, 500, seed ^ 0x5eedULL);
  std::fprintf(stderr,
               "device: %s\ndata: %s: %lld training images, %lld test images\n"
               "model: %lld parameters; %lld-%s-%lld MLPs, %s reconstruction, beta %g\n",
               context.info().name.c_str(), cli.get("data").c_str(),
               static_cast<long long>(train_rows), static_cast<long long>(set.test_images.count),
               static_cast<long long>(store.elements()), static_cast<long long>(config.pixels()),
               vae::widthsText(config.hidden).c_str(), static_cast<long long>(config.latent),
               vae::reconstructionName(config.recon), double(config.beta));

  std::vector<uint32_t> order(static_cast<size_t>(train_rows));
  std::iota(order.begin(), order.end(), 0u);
  const Series empty{"", {}, {}, {0, 0, 0}, true};
  Series train_recon = empty, train_kl = empty, test_recon = empty, test_kl = empty;
  train_recon.label = "train reconstruction";
  train_kl.label = "train KL";
  test_recon.label = "test reconstruction";
  test_kl.label = "test KL";
  std::copy_n(categoricalColour(0), 3, train_recon.rgb);
  std::copy_n(categoricalColour(1), 3, train_kl.rgb);
  std::copy_n(categoricalColour(2), 3, test_recon.rgb);
  std::copy_n(categoricalColour(3), 3, test_kl.rgb);
  // run.rng shuffles the order every epoch (a shuffle of the last epoch's order).
  RunState run{std::mt19937_64(seed),
               {&train_recon, &train_kl, &test_recon, &test_kl},
               fingerprint(set.train_images.pixels)};
  const int64_t first =
      resumeEpochs(cli, resumed, trainer, run, order, steps_per_epoch, epochs, seed) + 1;
  const int64_t last = lastUnit(cli, first - 1, epochs, "epoch");
  double train_seconds = 0, eval_seconds = 0;
  vae::VaeLoss test;
  graph::Json history = graph::Json::array();
  for (int64_t epoch = first; epoch <= last; ++epoch) {
    std::shuffle(order.begin(), order.end(), run.rng);
    Progress progress(epoch, epochs, steps_per_epoch);
    const auto start = Clock::now();
    double recon_sum = 0, kl_sum = 0;
    int64_t reads = 0;
    for (int64_t s = 1; s <= steps_per_epoch; ++s) {
      const std::span<const uint32_t> rows =
          std::span<const uint32_t>(order).subspan(size_t((s - 1) * batch), size_t(batch));
      // The loss terms come back every 10th step: each read waits for the GPU.
      if (trainer.step(rows, s % 10 == 0 || s == steps_per_epoch)) {
        recon_sum += trainer.metrics().at(0);
        kl_sum += trainer.metrics().at(1);
        ++reads;
      }
      char stats[96];
      std::snprintf(stats, sizeof stats, "recon %.2f  KL %.2f",
                    reads ? recon_sum / double(reads) : NAN, reads ? kl_sum / double(reads) : NAN);
      progress.update(s, s * batch, stats, secondsSince(start));
    }
    train_seconds += secondsSince(start);
    const auto eval_start = Clock::now();
    test = evaluator.evaluate();
    eval_seconds += secondsSince(eval_start);
    const double r = recon_sum / double(std::max<int64_t>(reads, 1));
    const double k = kl_sum / double(std::max<int64_t>(reads, 1));
    for (Series* s : {&train_recon, &train_kl, &test_recon, &test_kl})
      s->x.push_back(double(epoch));
    train_recon.y.push_back(r);
    train_kl.y.push_back(k);
    test_recon.y.push_back(test.recon);
    test_kl.y.push_back(test.kl);
    history.push_back(
        {{"epoch", epoch}, {"train_recon", r}, {"train_kl", k}, {"test", lossJson(test)}});
    std::printf(
        "epoch %lld/%lld  train recon %.2f KL %.2f  test recon %.2f KL %.2f -ELBO %.2f  (%s)\n",
        static_cast<long long>(epoch), static_cast<long long>(epochs), r, k, test.recon, test.kl,
        test.elbo(), duration(train_seconds + eval_seconds).c_str());
    std::fflush(stdout);
    trainer.saveState(out / kTrainStateFile, runMetadata(cli, kRun, "vkgrad-vae", run));
  }
  if (last < epochs) {
    printStopped("vkgrad-vae", out.string(), "epoch", last, epochs);
    return validationFailed(context, "vkgrad-vae") ? 1 : 0;
  }
  const int64_t ran = last - first + 1;
  const double train_rate = double(steps_per_epoch * ran * batch) / train_seconds;
  const double eval_rate = double(ran * set.test_images.count) / eval_seconds;

  store.save(out / vae::kModelFile);
  vae::VaeCheckpoint cp{config};
  cp.training = {{"data", cli.get("data")},
                 {"train_images", train_rows},
                 {"epochs", epochs},
                 {"batch", batch},
                 {"lr", lr},
                 {"seed", seed},
                 {"test", lossJson(test)}};
  vae::writeConfig(out, cp);
  PlotOptions plot;
  plot.title = "vkgrad-vae: loss terms per image (nats)";
  plot.x_label = "epoch";
  plot.y_label = "nats per image";
  plot.log_y = true;
  writeLinePlot(out / "curves.png", {train_recon, test_recon, train_kl, test_kl}, plot);
  std::vector<std::string> pictures = {"curves.png"};
  // Class names for captions and the latent plot's legend: Fashion-MNIST's by default, the
  // label numbers for other data (MNIST).
  std::vector<std::string> names;
  for (int c = 0; c < 10; ++c)
    names.push_back(cli.get("data") == data::kFashionMnistDir ? data::kFashionMnistClasses[c]
                                                              : std::to_string(c));
  for (const std::string& p :
       writePictures(out, context, store, config, set.test_images, set.test_labels, names, seed))
    pictures.push_back(p);
  std::string files = std::string(vae::kModelFile) + ", " + vae::kConfigFile;
  for (const std::string& p : pictures) files += ", " + p;
  std::printf(
      "done: %lld epochs in %s (training %.0f images/s, evaluation %.0f images/s), test recon "
      "%.2f + KL %.2f = -ELBO %.2f nats per image, peak device memory %.1f MiB\n"
      "wrote %s/{%s}\n",
      static_cast<long long>(epochs), duration(train_seconds + eval_seconds).c_str(), train_rate,
      eval_rate, test.recon, test.kl, test.elbo(),
      double(context.allocator().peakBytesInUse()) / 1048576.0, out.string().c_str(),
      files.c_str());
  if (options.profile)
    std::printf("GPU time of the last training step by op (%.1f ms in all, %u dispatches):\n%s",
                trainer.lastStepMilliseconds(), trainer.executor().dispatchCount(),
                graph::formatProfile(trainer.graph(), trainer.executor().profile()).c_str());
  if (cli.has("json")) {
    const graph::Json result = {{"command", "train"},
                                {"device", context.info().name},
                                {"epochs", epochs},
                                {"test", lossJson(test)},
                                {"history", history},
                                {"train_images_per_s", train_rate},
                                {"eval_images_per_s", eval_rate},
                                {"seconds", train_seconds + eval_seconds}};
    std::printf("%s\n", graph::dumpJson(result).c_str());
  }
  return validationFailed(context, "vkgrad-vae") ? 1 : 0;
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
