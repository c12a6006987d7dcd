// vkgrad-vit: trains a vision transformer (or, with --model cnn, a small convolutional
// network) on Fashion-MNIST (or any IDX image set) on the device, evaluates a checkpoint, and
// classifies PNG images. The models, their evaluation and checkpoints live in models/vit;
// this program parses options, reports progress and writes
// DIR/{model.safetensors, config.json, curves.png, confusion.png, predictions.png}.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include "common/app_main.h"
#include "common/cli.h"
#include "common/device_options.h"
#include "common/image_file.h"
#include "common/progress.h"
#include "common/resume.h"
#include "common/training_run.h"
#include "vit/options.h"
#include "vit/report.h"
#include "vkgrad/data/idx.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vit/checkpoint.h"
#include "vkgrad/vit/classifier.h"
#include "vkgrad/vit/vit.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

// The options that define a training run besides the shared ones (common/training_run.h).
const std::vector<const char*> kFixed{
    "data",        "patch",        "width", "layers", "heads",      "mlp-ratio",
    "dropout",     "norm",         "model", "conv1",  "conv2",      "hidden",
    "augment-pad", "augment-flip", "batch", "limit",  "class-names"};

// The shared options' defaults (common/training_run.h).
const RunDefaults kDefaults{.program = "vkgrad-vit",
                            .rows = Rows::Shuffled,
                            .lr = "2e-3",
                            .schedule = "cosine",
                            .warmup = "200",
                            .final_lr_divisor = 100,
                            .weight_decay = "0.05",
                            .clip = "1",
                            .out = "vit-out",
                            .blocks = true};

int train(int argc, char** argv) {
  Cli cli("vkgrad-vit train",
          "Trains a vision transformer (--model cnn: a small CNN) on Fashion-MNIST (or the IDX\n"
          "files in --data) and writes "
          "DIR/model.safetensors, DIR/config.json, DIR/curves.png, DIR/confusion.png and\n"
          "DIR/predictions.png. Test accuracy is measured after every epoch, and\n"
          "DIR/train_state.safetensors is saved after it (what --resume continues from).");
  cli.positional("train", "the command");
  declareModelOptions(cli);
  TrainingRun run(cli, kDefaults);
  cli.parse(argc, argv);
  run.parsed(kFixed);

  const vit::VitConfig config = configFromCli(cli);
  const std::vector<std::string> names = classNames(cli, config.classes);
  const int64_t batch = cli.getInt("batch", 1, 1 << 16);
  const int64_t limit = cli.getInt("limit", 0, int64_t(1) << 40);
  const data::ImageDataset set =
      data::loadImageSet(cli.get("data"), config.image, limit, int(config.classes));
  const int64_t train_rows = set.train_images.count;

  vk::Context& context = run.device();
  const graph::Dataset train_x = vit::uploadImages(context, "train.images", set.train_images.pixels,
                                                   train_rows, config.image, config.image);
  const graph::Dataset train_y = vit::uploadLabels(context, "train.labels", set.train_labels);
  const graph::Dataset test_x =
      vit::uploadImages(context, "test.images", set.test_images.pixels, set.test_images.count,
                        config.image, config.image);
  const graph::Dataset test_y = vit::uploadLabels(context, "test.labels", set.test_labels);
  graph::ParameterStore store(context);
  vit::declareVit(store, config);
  store.initialize(run.seed());
  graph::Trainer trainer(context, store, {&train_x, &train_y}, vit::vitLossFn(store, config),
                         run.trainerOptions(batch, train_rows));
  vit::Evaluator evaluator(context, store, config, test_x, test_y, 500);
  printHeader(context, cli.get("data"), set, store, config);

  Series error_curve{"test error %", {}, {}, {214, 39, 40}, true};
  vit::Confusion confusion;
  RunHooks hooks;
  hooks.data = fingerprint(set.train_images.pixels) + "; labels " + fingerprint(set.train_labels);
  hooks.items = "images";
  hooks.items_per_step = batch;
  hooks.rate_key = "train_images_per_s";
  hooks.curves = {&error_curve};
  hooks.plot = {.title = "vkgrad-vit: training loss and test error",
                .x_label = "epoch",
                .y_label = "loss (nats) / test error (%)",
                .log_y = true};
  hooks.evaluate = [&](int64_t epoch, const TrainStats&) {
    confusion = evaluator.evaluate();
    error_curve.x.push_back(double(epoch));
    error_curve.y.push_back(100.0 * (1.0 - confusion.accuracy()));
    return "test accuracy " + percent(confusion.accuracy());
  };
  hooks.save = [&](const fs::path& dir, int64_t epoch) {
    store.save(dir / vit::kModelFile, {}, run.modelDtype());
    vit::VitCheckpoint cp{config, names};
    cp.training = {{"data", cli.get("data")}, {"train_images", train_rows},
                   {"epochs", run.units()},   {"epochs_done", epoch},
                   {"batch", batch},          {"lr", run.peakLr()},
                   {"seed", run.seed()},      {"test_accuracy", confusion.accuracy()}};
    vit::writeConfig(dir, cp);
    return std::vector<std::string>{vit::kModelFile, vit::kConfigFile};
  };
  hooks.finish = [&](graph::Json& json) {
    std::printf("test accuracy %s\n", percent(confusion.accuracy()).c_str());
    json.update(confusionJson(confusion, names));
    json["eval_images_per_s"] =
        double(run.evaluations() * set.test_images.count) / run.evalSeconds();
    return writePictures(run.out(), context, store, config, set.test_images, set.test_labels, names,
                         confusion);
  };
  return run.train(trainer, hooks);
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
  // The model's image size and classes: other data is refused naming the file, not the op.
  const data::ImageDataset set =
      data::loadImageSet(cli.get("data"), cp.config.image, 0, int(cp.config.classes));
  vk::Context context(contextOptions(cli));
  graph::ParameterStore store(context);
  loadModel(dir, cp.config, store);
  const graph::Dataset test_x =
      vit::uploadImages(context, "test.images", set.test_images.pixels, set.test_images.count,
                        cp.config.image, cp.config.image);
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

int dump(int argc, char** argv) {
  Cli cli("vkgrad-vit dump",
          "Writes one batch's forward and backward for checking against another framework\n"
          "(bench/peers/cnn_torch.py): the first --count test images and labels, the logits,\n"
          "the mean cross-entropy and every parameter's gradient, as safetensors: pixels\n"
          "(count,image,image) f32 bytes, labels u32, logits, loss, grad.<parameter>.");
  cli.positional("dump", "the command");
  cli.option("checkpoint", "checkpoint directory (required)");
  cli.option("data", "folder of the IDX files (plain or .gz)", data::kFashionMnistDir);
  cli.option("count", "test images in the batch", "16");
  cli.option("out", "the safetensors file to write (required)");
  declareDeviceOptions(cli);
  cli.parse(argc, argv);
  if (cli.get("checkpoint").empty() || cli.get("out").empty())
    cli.fail("--checkpoint and --out are required");
  const fs::path dir = cli.get("checkpoint");
  const vit::VitCheckpoint cp = vit::readConfig(dir);
  const int64_t count = cli.getInt("count", 1, 10000);
  const data::ImageDataset set =
      data::loadImageSet(cli.get("data"), cp.config.image, 0, int(cp.config.classes));
  if (count > set.test_images.count) cli.fail("--count is more than the test images");
  const int64_t image = cp.config.image * cp.config.image;
  const std::span<const uint8_t> pixels(set.test_images.pixels.data(), size_t(count * image));
  const std::vector<uint32_t> labels(set.test_labels.begin(), set.test_labels.begin() + count);
  vk::Context context(contextOptions(cli));
  graph::ParameterStore store(context);
  loadModel(dir, cp.config, store);
  const vit::BatchGradients got = vit::batchGradients(context, store, cp.config, pixels, labels);
  auto floats = [](std::string name, std::vector<int64_t> shape, const std::vector<float>& v) {
    graph::SavedTensor t{std::move(name), ops::DType::F32, std::move(shape), {}};
    t.data.resize(v.size());
    std::memcpy(t.data.data(), v.data(), v.size() * 4);
    return t;
  };
  graph::Checkpoint file;
  file.tensors.push_back(floats("pixels", {count, cp.config.image, cp.config.image},
                                std::vector<float>(pixels.begin(), pixels.end())));
  file.tensors.push_back({"labels", ops::DType::U32, {count}, labels});
  file.tensors.push_back(floats("logits", {count, cp.config.classes}, got.logits));
  file.tensors.push_back(floats("loss", {1}, {got.loss}));
  for (const auto& [name, grad] : got.gradients)
    file.tensors.push_back(floats("grad." + name, graph::savedDims(store.at(name).shape), grad));
  graph::saveSafetensors(cli.get("out"), file);
  std::printf("wrote %s: %lld images, loss %.6f, %zu gradients\n", cli.get("out").c_str(),
              static_cast<long long>(count), double(got.loss), got.gradients.size());
  return validationFailed(context, "vkgrad-vit") ? 1 : 0;
}

const char* const kUsage =
    "usage: vkgrad-vit train [options]      train and write a checkpoint\n"
    "       vkgrad-vit eval --checkpoint DIR [options]\n"
    "       vkgrad-vit predict --checkpoint DIR IMAGE.png...\n"
    "       vkgrad-vit dump --checkpoint DIR --out FILE.safetensors\n"
    "Each command takes --help.\n";

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  using namespace vkgrad::apps;
  return commandMain(
      "vkgrad-vit", "vkgrad-vit: a vision transformer on Fashion-MNIST, trained on the device.",
      kUsage, {{"train", train}, {"eval", eval}, {"predict", predict}, {"dump", dump}}, argc, argv);
}
