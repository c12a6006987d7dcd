#include "vit/report.h"

#include <algorithm>
#include <cstdio>

#include "common/figures.h"
#include "vkgrad/vit/classifier.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {

std::string percent(double fraction) {
  char text[16];
  std::snprintf(text, sizeof text, "%.2f%%", 100.0 * fraction);
  return text;
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
void writePredictions(const std::filesystem::path& path, vk::Context& context,
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

std::vector<std::string> writePictures(const std::filesystem::path& dir, vk::Context& context,
                                       const graph::ParameterStore& store,
                                       const vit::VitConfig& config, const data::Images& images,
                                       std::span<const uint8_t> labels,
                                       const std::vector<std::string>& names,
                                       const vit::Confusion& confusion) {
  writeConfusionPng(dir / "confusion.png", confusion.counts, names,
                    "vkgrad-vit: test set, " + std::to_string(confusion.total()) +
                        " images, accuracy " + percent(confusion.accuracy()));
  writePredictions(dir / "predictions.png", context, store, config, images, labels, names);
  return {"confusion.png", "predictions.png"};
}

void printHeader(const vk::Context& context, const std::string& data, const data::ImageDataset& set,
                 const graph::ParameterStore& store, const vit::VitConfig& config) {
  std::fprintf(stderr, "device: %s\ndata: %s: %lld training images, %lld test images\n",
               context.info().name.c_str(), data.c_str(),
               static_cast<long long>(set.train_images.count),
               static_cast<long long>(set.test_images.count));
  if (config.kind == vit::ModelKind::Cnn)
    std::fprintf(stderr,
                 "model: CNN, %lld parameters; conv 5x5 %lld, pool 2, conv 5x5 %lld, pool 2, "
                 "hidden %lld\n",
                 static_cast<long long>(store.elements()), static_cast<long long>(config.conv1),
                 static_cast<long long>(config.conv2), static_cast<long long>(config.hidden));
  else
    std::fprintf(stderr,
                 "model: %lld parameters; patch %lld (%lld patches + class token), width %lld, "
                 "%lld layers, %lld heads, MLP x%lld\n",
                 static_cast<long long>(store.elements()), static_cast<long long>(config.patch),
                 static_cast<long long>(config.patches()), static_cast<long long>(config.width),
                 static_cast<long long>(config.layers), static_cast<long long>(config.heads),
                 static_cast<long long>(config.mlp_ratio));
  if (config.augment_pad > 0 || config.augment_flip)
    std::fprintf(stderr, "augment: shifts of up to %lld pixels, %s\n",
                 static_cast<long long>(config.augment_pad),
                 config.augment_flip ? "mirrored half the time" : "no mirroring");
}

}  // namespace vkgrad::apps
