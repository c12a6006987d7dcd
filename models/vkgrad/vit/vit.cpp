#include "vkgrad/vit/vit.h"

#include <cstring>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/ops/augment.h"
#include "vkgrad/runtime/ops/bytes_to_float.h"
#include "vkgrad/runtime/ops/patchify.h"
#include "vkgrad/runtime/ops/prepend_token.h"
#include "vkgrad/runtime/ops/take_row.h"
#include "vkgrad/vit/cnn.h"

namespace vkgrad::vit {

using graph::Init;
using graph::Tensor;

const char* modelKindName(ModelKind kind) {
  return kind == ModelKind::Cnn ? "cnn" : "vit";
}

ModelKind modelKindFromName(const std::string& name) {
  if (name == "vit") return ModelKind::Vit;
  if (name == "cnn") return ModelKind::Cnn;
  throw Error("model kind \"" + name + "\": must be vit or cnn");
}

void VitConfig::validate() const {
  auto fail = [](const std::string& why) { throw Error("VitConfig: " + why); };
  if (image <= 0 || image % 2 != 0) fail("image must be a positive even size");
  if (kind == ModelKind::Cnn) {
    // Two 2x2 poolings; widths small enough that no tensor nears the kernels' 2^31 indices.
    if (image % 4 != 0) fail("the CNN's image size must be a multiple of 4");
    if (conv1 <= 0 || conv1 > 1024 || conv2 <= 0 || conv2 > 1024)
      fail("conv1 and conv2 must be in [1, 1024]");
    if (hidden <= 0 || hidden > 16384) fail("hidden must be in [1, 16384]");
  } else {
    if (patch <= 0 || image % patch != 0)
      fail("patch " + std::to_string(patch) + " must divide the image size " +
           std::to_string(image));
    if (layers <= 0 || layers > 64) fail("layers must be in [1, 64]");
    if (heads <= 0) fail("heads must be positive");
    if (width <= 0 || width > 4096 || width % heads != 0)
      fail("width " + std::to_string(width) + " must be a multiple of heads " +
           std::to_string(heads) + " in [1, 4096]");
    if (mlp_ratio <= 0 || mlp_ratio > 16) fail("mlp_ratio must be in [1, 16]");
  }
  if (classes < 2) fail("classes must be at least 2");
  if (!(dropout >= 0.0f && dropout < 1.0f)) fail("dropout must be in [0, 1)");
  // The pixels' normalisation: pixels are in [0, 1], so a mean or a spread far outside it is
  // a broken config (1e300 reads as inf, 1e-30 divides to inf), not a model.
  if (!(mean >= -1e3f && mean <= 1e3f))
    fail("mean " + std::to_string(mean) + " must be in [-1000, 1000]");
  if (!(stddev >= 1e-6f && stddev <= 1e3f))
    fail("stddev " + std::to_string(stddev) + " must be in [1e-6, 1000]");
  if (augment_pad < 0 || augment_pad >= image / 2)
    fail("augment_pad " + std::to_string(augment_pad) + " must be in [0, " +
         std::to_string(image / 2) + ")");
}

nn::BlockConfig VitConfig::block() const {
  nn::BlockConfig b;
  b.width = width;
  b.heads = heads;
  b.hidden = mlp_ratio * width;
  b.norm = norm;
  b.activation = activation;
  b.causal = false;  // every patch sees every other
  b.dropout = dropout;
  return b;
}

void declareVit(graph::ParameterStore& store, const VitConfig& config) {
  if (config.kind == ModelKind::Cnn) return declareCnn(store, config);
  config.validate();
  const Init small = Init::normal(0.0f, 0.02f);
  nn::declareLinear(store, "patch", config.patch * config.patch, config.width);
  store.add("cls", {config.width}, small);
  store.add("pos", {config.patches() + 1, config.width}, small);
  for (int64_t i = 0; i < config.layers; ++i)
    nn::declareBlock(store, nn::blockName(i), config.block());
  if (config.norm == nn::Norm::Pre) nn::declareLayerNorm(store, "ln_f", config.width);
  nn::declareLinear(store, "head", config.width, config.classes);
}

Tensor vitLogits(graph::Graph& g, const graph::ParameterStore& store, const VitConfig& config,
                 Tensor words) {
  const ops::Shape s = g.shape(words);
  const int64_t pixels = config.image * config.image;
  if (s.rank() != 2 || s[1] * 4 != pixels)
    throw ShapeError(g.describe("vitLogits", {words}) + ": images must be (B, " +
                     std::to_string(pixels / 4) + ") words of 4 pixels");
  // (byte / 255 - mean) / stddev as one scale and shift.
  const float scale = 1.0f / (255.0f * config.stddev), shift = -config.mean / config.stddev;
  // Augmented (training graphs only) with the normalised value of a 0 byte shifted in: the
  // background of the images, not the mean grey that 0 would be after normalising.
  const Tensor images = graph::augment(
      g, graph::bytesToFloat(g, words, {s[0], config.image, config.image}, scale, shift),
      config.augment_pad, config.augment_flip, shift);
  if (config.kind == ModelKind::Cnn) return cnnLogits(g, store, config, images);
  Tensor x = nn::linear(g, store, "patch", graph::patchify(g, images, config.patch));  // (B,P,C)
  x = graph::prependToken(g, x, g.parameter(store.at("cls")));                         // (B,P+1,C)
  x = g.dropout(g.add(x, g.parameter(store.at("pos"))), config.dropout);
  for (int64_t i = 0; i < config.layers; ++i)
    // A recomputed segment (Graph::recomputed): where the trainer asks for it, only x is kept.
    x = g.recomputed([&] { return nn::block(g, store, nn::blockName(i), config.block(), x); });
  if (config.norm == nn::Norm::Pre) x = nn::layerNorm(g, store, "ln_f", x);
  return nn::linear(g, store, "head", graph::takeRow(g, x, 0));  // the class token's row
}

Tensor vitLoss(graph::Graph& g, const graph::ParameterStore& store, const VitConfig& config,
               Tensor words, Tensor labels) {
  return g.crossEntropy(vitLogits(g, store, config, words), labels);
}

graph::LossFn vitLossFn(const graph::ParameterStore& store, const VitConfig& config) {
  return [&store, &config](graph::Graph& g, std::span<const Tensor> batch) {
    if (batch.size() != 2) throw Error("vitLossFn: needs two datasets (images, labels)");
    return vitLoss(g, store, config, batch[0], batch[1]);
  };
}

graph::Dataset uploadImages(vk::Context& context, const std::string& name,
                            std::span<const uint8_t> pixels, int64_t count, int64_t rows,
                            int64_t cols) {
  if (count <= 0 || rows <= 0 || cols <= 0 || (rows * cols) % 4 != 0 ||
      int64_t(pixels.size()) != count * rows * cols)
    throw Error("uploadImages " + name + ": " + std::to_string(pixels.size()) + " pixels for " +
                std::to_string(count) + " images of " + std::to_string(rows) + "x" +
                std::to_string(cols) + " (the pixels of one image must fill whole words)");
  std::vector<uint32_t> words(pixels.size() / 4);
  std::memcpy(words.data(), pixels.data(), pixels.size());  // little-endian: byte i of word
  return graph::uploadDataset(context, name, {count, rows * cols / 4}, words);
}

graph::Dataset uploadLabels(vk::Context& context, const std::string& name,
                            std::span<const uint8_t> labels) {
  if (labels.empty()) throw Error("uploadLabels " + name + ": no labels");
  const std::vector<uint32_t> words(labels.begin(), labels.end());
  return graph::uploadDataset(context, name, {int64_t(words.size())}, words);
}

}  // namespace vkgrad::vit
