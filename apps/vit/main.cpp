// vkgrad-vit: trains a vision transformer on Fashion-MNIST (or any IDX image set) on the
// device, evaluates a checkpoint, and classifies PNG images. The model, its evaluation and
// checkpoints live in models/vit; this program parses options, reports progress and writes
// DIR/{model.safetensors, config.json, curves.png, confusion.png, predictions.png}.
#include <algorithm>
#include <chrono>
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
#include "vkgrad/vit/checkpoint.h"
#include "vkgrad/vit/classifier.h"
#include "vkgrad/vit/vit.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/core/error.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

// --class-names: comma-separated, one per class; the default names Fashion-MNIST's.
std::vector<std::string> classNames(const Cli& cli, int64_t classes) {
  const std::string text = cli.get("class-names");
  if (text.empty())
    return {std::begin(data::kFashionMnistClasses), std::end(data::kFashionMnistClasses)};
  std::vector<std::string> names;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    names.push_back(text.substr(begin, comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (int64_t(names.size()) != classes)
    cli.fail("--class-names lists " + std::to_string(names.size()) + " names for " +
             std::to_string(classes) + " classes");
  return names;
}

vit::VitConfig configFromCli(const Cli& cli) {
  vit::VitConfig c;
  c.patch = cli.getInt("patch", 1, 28);
  c.width = cli.getInt("width", 1, 4096);
  c.layers = cli.getInt("layers", 1, 64);
  c.heads = cli.getInt("heads", 1, 4096);
  c.mlp_ratio = cli.getInt("mlp-ratio", 1, 16);
  c.dropout = float(cli.getDouble("dropout", 0.0, 0.99));
  try {
    c.norm = nn::normFromName(cli.get("norm"));
  } catch (const Error& e) {
    cli.fail(std::string("--norm: ") + e.what());
  }
  c.augment_pad = cli.getInt("augment-pad", 0, 4096);
  c.augment_flip = cli.has("augment-flip");
  try {
    c.validate();
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  return c;
}

void printConfusion(const vit::Confusion& c, const std::vector<std::string>& names) {
  std::printf("confusion (rows: true class, columns: predicted)\n%14s", "");
  for (int64_t p = 0; p < c.classes; ++p) std::printf(" %6lld", static_cast<long long>(p));
  std::printf("   accuracy\n");
  for (int64_t t = 0; t < c.classes; ++t) {
    std::printf("%2lld %-11.11s", static_cast<long long>(t), names[size_t(t)].c_str());
    for (int64_t p = 0; p < c.classes; ++p)
      std::printf(" %6llu", static_cast<unsigned long long>(c.counts[size_t(t * c.classes + p)]));
    std::printf("   %6.2f%%\n", 100.0 * c.classAccuracy(t));
  }
}

graph::Json confusionJson(const vit::Confusion& c, const std::vector<std::string>& names) {
  graph::Json per_class = graph::Json::array(), matrix = graph::Json::array();
  for (int64_t t = 0; t < c.classes; ++t) {
    per_class.push_back({{"class", names[size_t(t)]}, {"accuracy", c.classAccuracy(t)}});
    graph::Json row = graph::Json::array();
    for (int64_t p = 0; p < c.classes; ++p) row.push_back(c.counts[size_t(t * c.classes + p)]);
    matrix.push_back(row);
  }
  return {{"accuracy", c.accuracy()},
          {"images", c.total()},
          {"per_class", per_class},
          {"confusion", matrix}};
}

// A grid of the first test images that the model gets right and wrong: every wrong one among
// the first `count`, framed in red, with the predicted and the true class.
void writePredictions(const fs::path& path, vk::Context& context,
                      const graph::ParameterStore& store, const vit::VitConfig& config,
                      const data::Images& images, std::span<const uint8_t> labels,
                      const std::vector<std::string>& names) {
  const int64_t count = std::min<int64_t>(48, images.count);
  const size_t image = size_t(images.rows * images.cols);
  vit::Predictor predictor(context, store, config, 16);
  const std::vector<float> probs =
      predictor.probabilities(std::span(images.pixels).first(size_t(count) * image));
  std::vector<GridImage> grid;
  int wrong = 0;
  for (int64_t i = 0; i < count; ++i) {
    const float* row = probs.data() + size_t(i) * size_t(config.classes);
    const auto pred = int64_t(std::max_element(row, row + config.classes) - row);
    const bool ok = pred == labels[size_t(i)];
    wrong += !ok;
    grid.push_back(
        {std::span(images.pixels).subspan(size_t(i) * image, image),
         ok ? names[size_t(pred)] : names[size_t(pred)] + " (" + names[labels[size_t(i)]] + ")",
         !ok});
  }
  writeImageGridPng(path, grid, int(images.rows), int(images.cols), 8, 3,
                    "vkgrad-vit: the first " + std::to_string(count) + " test images, " +
                        std::to_string(wrong) + " wrong (red: predicted (true))");
}

// The options that define a training run, and its rhythm (apps/common/resume.h).
const RunOptions kRun{
    {"data", "patch", "width", "layers", "heads", "mlp-ratio", "dropout", "norm", "augment-pad",
     "augment-flip", "batch", "lr", "warmup", "weight-decay", "seed", "limit", "class-names"},
    {"epochs"}};

int train(int argc, char** argv) {
  Cli cli("vkgrad-vit train",
          "Trains a vision transformer on Fashion-MNIST (or the IDX files in --data) and writes\n"
          "DIR/model.safetensors, DIR/config.json, DIR/curves.png, DIR/confusion.png and\n"
          "DIR/predictions.png. Test accuracy is measured after every epoch, and\n"
          "DIR/train_state.safetensors is saved after it (what --resume continues from).");
  cli.positional("train", "the command");
  cli.option("data", "folder of the IDX files (plain or .gz)", data::kFashionMnistDir);
  cli.option("out", "checkpoint directory (created if missing)", "vit-out");
  cli.option("patch", "patch size in pixels (a divisor of 28)", "7");
  cli.option("width", "model width (a multiple of heads)", "64");
  cli.option("layers", "transformer blocks", "4");
  cli.option("heads", "attention heads per block", "4");
  cli.option("mlp-ratio", "MLP hidden width / model width", "2");
  cli.option("dropout", "dropout probability", "0");
  cli.option("norm", "pre (pre-norm blocks and a final norm) or post (the original transformer)",
             "pre");
  cli.option("augment-pad", "shift training images by up to N pixels each way (0: off, < 14)", "0");
  cli.flag("augment-flip", "mirror training images left to right half the time");
  cli.option("batch", "images per step", "128");
  cli.option("epochs", "passes over the training set", "10");
  cli.option("lr", "peak learning rate (AdamW)", "2e-3");
  cli.option("warmup", "warm-up steps before the cosine decay", "200");
  cli.option("weight-decay", "AdamW decoupled weight decay (matrices only)", "0.05");
  cli.option("seed", "initialisation and shuffling seed", "1");
  cli.option("limit", "train on the first N images only (0: all)", "0");
  cli.option("class-names",
             "the classes' names, comma-separated (default: Fashion-MNIST's; for MNIST: "
             "0,1,2,3,4,5,6,7,8,9)");
  declareDeviceOptions(cli);
  cli.flag("profile",
           "time every node of the training step and print the last step's GPU time by op "
           "(a timestamp per node)");
  cli.flag("json", "end with one JSON line of results");
  declareResumeOptions(cli, "epoch");
  cli.parse(argc, argv);
  std::optional<graph::Checkpoint> resumed = resumeRun(cli, kRun, "vkgrad-vit");

  const vit::VitConfig config = configFromCli(cli);
  const std::vector<std::string> names = classNames(cli, config.classes);
  const int64_t batch = cli.getInt("batch", 1, 1 << 16);
  const int64_t epochs = cli.getInt("epochs", 1, 10000);
  const float lr = float(cli.getDouble("lr", 1e-8, 10.0));
  const uint64_t seed = uint64_t(cli.getInt("seed", 0, INT64_MAX));
  const int64_t limit = cli.getInt("limit", 0, int64_t(1) << 40);
  const bool json = cli.has("json");

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
  const graph::Dataset train_y = vit::uploadLabels(context, "train.labels", set.train_labels);
  const graph::Dataset test_x =
      vit::uploadImages(context, "test.images", set.test_images.pixels, set.test_images.count,
                        config.image, config.image);
  const graph::Dataset test_y = vit::uploadLabels(context, "test.labels", set.test_labels);

  graph::ParameterStore store(context);
  vit::declareVit(store, config);
  store.initialize(seed);
  const int64_t steps_per_epoch = train_rows / batch, steps = steps_per_epoch * epochs;
  graph::TrainerOptions options;
  options.batch = batch;
  options.optimizer.adamw.weight_decay = float(cli.getDouble("weight-decay", 0.0, 10.0));
  options.optimizer.max_grad_norm = 1.0f;
  options.dropout_seed = seed;
  options.profile = cli.has("profile");
  const int64_t warmup = std::min(cli.getInt("warmup", 0, int64_t(1) << 40), steps);
  options.schedule = graph::Schedule::cosine(lr, warmup, steps - warmup, lr / 100);
  graph::Trainer trainer(context, store, {&train_x, &train_y}, vit::vitLossFn(store, config),
                         options);
  vit::Evaluator evaluator(context, store, config, test_x, test_y, 500);
  std::fprintf(stderr,
               "device: %s\ndata: %s: %lld training images, %lld test images\n"
               "model: %lld parameters; patch %lld (%lld patches + class token), width %lld, "
               "%lld layers, %lld heads, MLP x%lld\n",
               context.info().name.c_str(), cli.get("data").c_str(),
               static_cast<long long>(train_rows), static_cast<long long>(set.test_images.count),
               static_cast<long long>(store.elements()), static_cast<long long>(config.patch),
               static_cast<long long>(config.patches()), static_cast<long long>(config.width),
               static_cast<long long>(config.layers), static_cast<long long>(config.heads),
               static_cast<long long>(config.mlp_ratio));
  if (config.augment_pad > 0 || config.augment_flip)
    std::fprintf(stderr, "augment: shifts of up to %lld pixels, %s\n",
                 static_cast<long long>(config.augment_pad),
                 config.augment_flip ? "mirrored half the time" : "no mirroring");

  std::vector<uint32_t> order(static_cast<size_t>(train_rows));
  std::iota(order.begin(), order.end(), 0u);
  Series loss_curve{"train loss (epoch mean)", {}, {}, {31, 119, 180}, true};
  Series acc_curve{"test error %", {}, {}, {214, 39, 40}, true};
  // run.rng shuffles the order every epoch (a shuffle of the last epoch's order).
  RunState run{std::mt19937_64(seed),
               {&loss_curve, &acc_curve},
               fingerprint(set.train_images.pixels) + "; labels " + fingerprint(set.train_labels)};
  const int64_t first =
      resumeEpochs(cli, resumed, trainer, run, order, steps_per_epoch, epochs, seed) + 1;
  const int64_t last = lastUnit(cli, first - 1, epochs, "epoch");
  double train_seconds = 0, eval_seconds = 0;
  vit::Confusion confusion;
  for (int64_t epoch = first; epoch <= last; ++epoch) {
    std::shuffle(order.begin(), order.end(), run.rng);
    Progress progress(epoch, epochs, steps_per_epoch);
    const auto start = Clock::now();
    double loss_sum = 0;
    int64_t loss_count = 0;
    float last = NAN;
    for (int64_t s = 1; s <= steps_per_epoch; ++s) {
      const std::span<const uint32_t> rows =
          std::span<const uint32_t>(order).subspan(size_t((s - 1) * batch), size_t(batch));
      // The loss comes back every 10th step: each read waits for the GPU.
      if (const auto l = trainer.step(rows, s % 10 == 0 || s == steps_per_epoch)) {
        last = *l;
        loss_sum += *l;
        ++loss_count;
      }
      char stats[32];
      std::snprintf(stats, sizeof stats, "loss %.4f", double(last));
      progress.update(s, s * batch, stats, secondsSince(start));
    }
    train_seconds += secondsSince(start);
    const auto eval_start = Clock::now();
    confusion = evaluator.evaluate();
    eval_seconds += secondsSince(eval_start);
    loss_curve.x.push_back(double(epoch));
    loss_curve.y.push_back(loss_sum / double(std::max<int64_t>(loss_count, 1)));
    acc_curve.x.push_back(double(epoch));
    acc_curve.y.push_back(100.0 * (1.0 - confusion.accuracy()));
    std::printf("epoch %lld/%lld  train loss %.4f  test accuracy %.2f%%  (%s)\n",
                static_cast<long long>(epoch), static_cast<long long>(epochs), loss_curve.y.back(),
                100.0 * confusion.accuracy(), duration(train_seconds + eval_seconds).c_str());
    std::fflush(stdout);
    trainer.saveState(out / kTrainStateFile, runMetadata(cli, kRun, "vkgrad-vit", run));
  }
  if (last < epochs) {
    printStopped("vkgrad-vit", out.string(), "epoch", last, epochs);
    return validationFailed(context, "vkgrad-vit") ? 1 : 0;
  }
  const int64_t ran = last - first + 1;
  const double train_rate = double(steps_per_epoch * ran * batch) / train_seconds;
  const double eval_rate = double(ran * set.test_images.count) / eval_seconds;

  store.save(out / vit::kModelFile);
  vit::VitCheckpoint cp{config, names};
  cp.training = {{"data", cli.get("data")},
                 {"train_images", train_rows},
                 {"epochs", epochs},
                 {"batch", batch},
                 {"lr", lr},
                 {"seed", seed},
                 {"test_accuracy", confusion.accuracy()}};
  vit::writeConfig(out, cp);
  PlotOptions plot;
  plot.title = "vkgrad-vit: training loss and test error";
  plot.x_label = "epoch";
  plot.y_label = "loss (nats) / test error (%)";
  plot.log_y = true;
  writeLinePlot(out / "curves.png", {loss_curve, acc_curve}, plot);
  writeConfusionPng(out / "confusion.png", confusion.counts, names,
                    "vkgrad-vit: test set, " + std::to_string(confusion.total()) +
                        " images, accuracy " +
                        std::to_string(100.0 * confusion.accuracy()).substr(0, 5) + "%");
  writePredictions(out / "predictions.png", context, store, config, set.test_images,
                   set.test_labels, names);
  std::printf(
      "done: %lld epochs in %s (training %.0f images/s, evaluation %.0f images/s), "
      "test accuracy %.2f%%, peak device memory %.1f MiB\n"
      "wrote %s/{%s, %s, curves.png, confusion.png, predictions.png}\n",
      static_cast<long long>(epochs), duration(train_seconds + eval_seconds).c_str(), train_rate,
      eval_rate, 100.0 * confusion.accuracy(),
      double(context.allocator().peakBytesInUse()) / 1048576.0, out.string().c_str(),
      vit::kModelFile, vit::kConfigFile);
  if (options.profile)
    std::printf("GPU time of the last training step by op (%.1f ms in all, %u dispatches):\n%s",
                trainer.lastStepMilliseconds(), trainer.executor().dispatchCount(),
                graph::formatProfile(trainer.graph(), trainer.executor().profile()).c_str());
  if (json) {
    graph::Json result = confusionJson(confusion, names);
    result["command"] = "train";
    result["device"] = context.info().name;
    result["epochs"] = epochs;
    result["train_images_per_s"] = train_rate;
    result["eval_images_per_s"] = eval_rate;
    result["seconds"] = train_seconds + eval_seconds;
    std::printf("%s\n", graph::dumpJson(result).c_str());
  }
  return validationFailed(context, "vkgrad-vit") ? 1 : 0;
}

// The store of a checkpoint directory, loaded; throws Error naming what does not match.
void loadModel(const fs::path& dir, const vit::VitConfig& config, graph::ParameterStore& store) {
  vit::declareVit(store, config);
  store.load(dir / vit::kModelFile);
}

int eval(int argc, char** argv) {
  Cli cli("vkgrad-vit eval",
          "Test accuracy, per-class accuracy and the confusion matrix of a\n"
          "checkpoint that vkgrad-vit train wrote.");
  cli.positional("eval", "the command");
  cli.option("checkpoint", "checkpoint directory (required)");
  cli.option("data", "folder of the IDX files (plain or .gz)", data::kFashionMnistDir);
  cli.option("batch", "images per forward pass", "500");
  declareDeviceOptions(cli);
  cli.flag("json", "print the results as one JSON line");
  cli.parse(argc, argv);
  if (cli.get("checkpoint").empty()) cli.fail("--checkpoint is required");
  const fs::path dir = cli.get("checkpoint");
  const vit::VitCheckpoint cp = vit::readConfig(dir);
  const data::ImageDataset set = data::loadFashionMnist(cli.get("data"));
  vk::Context context(contextOptions(cli));
  graph::ParameterStore store(context);
  loadModel(dir, cp.config, store);
  const graph::Dataset test_x =
      vit::uploadImages(context, "test.images", set.test_images.pixels, set.test_images.count,
                        set.test_images.rows, set.test_images.cols);
  const graph::Dataset test_y = vit::uploadLabels(context, "test.labels", set.test_labels);
  vit::Evaluator evaluator(context, store, cp.config, test_x, test_y,
                           cli.getInt("batch", 1, 1 << 16));
  const auto start = Clock::now();
  const vit::Confusion c = evaluator.evaluate();
  const double seconds = secondsSince(start);
  if (cli.has("json")) {
    graph::Json result = confusionJson(c, cp.class_names);
    result["command"] = "eval";
    result["device"] = context.info().name;
    result["images_per_s"] = double(c.total()) / seconds;
    std::printf("%s\n", graph::dumpJson(result).c_str());
  } else {
    std::printf("test accuracy %.2f%% (%llu of %llu images), %.0f images/s on %s\n",
                100.0 * c.accuracy(), static_cast<unsigned long long>(c.correct()),
                static_cast<unsigned long long>(c.total()), double(c.total()) / seconds,
                context.info().name.c_str());
    printConfusion(c, cp.class_names);
  }
  return validationFailed(context, "vkgrad-vit") ? 1 : 0;
}

int predict(int argc, char** argv) {
  Cli cli("vkgrad-vit predict",
          "Classifies PNG images with a checkpoint: the top 3 classes with probabilities.\n"
          "Images are read as grey, and resized to the model's size by averaging the source\n"
          "pixels under each target pixel (or bilinear when enlarging). Fashion-MNIST shows\n"
          "light clothes on black: pass --invert for dark objects on a light background.");
  cli.positional("predict", "the command");
  cli.positional("IMAGE...", "the images to classify");
  cli.option("checkpoint", "checkpoint directory (required)");
  cli.flag("invert", "invert the grey values first (dark object on a light background)");
  declareDeviceOptions(cli);
  cli.flag("json", "print the results as one JSON line");
  cli.parse(argc, argv);
  const std::vector<std::string>& args = cli.positionals();
  if (cli.get("checkpoint").empty()) cli.fail("--checkpoint is required");
  if (args.size() < 2) cli.fail("name at least one PNG image after the options");
  const fs::path dir = cli.get("checkpoint");
  const vit::VitCheckpoint cp = vit::readConfig(dir);
  const std::vector<uint8_t> pixels = readGreyImages(
      std::span(args).subspan(1), int(cp.config.image), cli.has("invert"));  // args[0]: command
  vk::Context context(contextOptions(cli));
  graph::ParameterStore store(context);
  loadModel(dir, cp.config, store);
  vit::Predictor predictor(context, store, cp.config, 16);
  const std::vector<float> probs = predictor.probabilities(pixels);
  graph::Json results = graph::Json::array();
  for (size_t i = 1; i < args.size(); ++i) {
    const float* row = probs.data() + (i - 1) * size_t(cp.config.classes);
    std::vector<int> top(size_t(cp.config.classes));
    std::iota(top.begin(), top.end(), 0);
    std::partial_sort(top.begin(), top.begin() + 3, top.end(),
                      [&](int a, int b) { return row[a] > row[b]; });
    graph::Json best = graph::Json::array();
    if (!cli.has("json")) std::printf("%s:", args[i].c_str());
    for (int k = 0; k < 3; ++k) {
      const std::string& name = cp.class_names[size_t(top[size_t(k)])];
      best.push_back({{"class", name}, {"probability", row[top[size_t(k)]]}});
      if (!cli.has("json")) std::printf("  %s %.1f%%", name.c_str(), 100.0 * row[top[size_t(k)]]);
    }
    if (!cli.has("json")) std::printf("\n");
    results.push_back({{"image", args[i]}, {"top", best}});
  }
  if (cli.has("json"))
    std::printf("%s\n", graph::dumpJson({{"command", "predict"}, {"results", results}}).c_str());
  return validationFailed(context, "vkgrad-vit") ? 1 : 0;
}

const char* const kUsage =
    "usage: vkgrad-vit train [options]      train and write a checkpoint\n"
    "       vkgrad-vit eval --checkpoint DIR [options]\n"
    "       vkgrad-vit predict --checkpoint DIR IMAGE.png...\n"
    "Each command takes --help.\n";

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  using namespace vkgrad::apps;
  return commandMain("vkgrad-vit",
                     "vkgrad-vit: a vision transformer on Fashion-MNIST, trained on the device.",
                     kUsage, {{"train", train}, {"eval", eval}, {"predict", predict}}, argc, argv);
}
