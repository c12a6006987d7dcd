#include "vkgrad/vit/cnn.h"

#include <cmath>

#include "vkgrad/nn/layers.h"
#include "vkgrad/ops/conv2d.h"
#include "vkgrad/ops/pool2d.h"

namespace vkgrad::vit {

using graph::Init;
using graph::Tensor;

namespace {

constexpr int64_t kKernel = 5;

void declareConv(graph::ParameterStore& store, const std::string& prefix, int64_t in, int64_t out) {
  const float bound = std::sqrt(6.0f / float(in * kKernel * kKernel));
  store.add(prefix + ".w", {out, in, kKernel, kKernel}, Init::uniform(-bound, bound));
  store.add(prefix + ".b", {out}, Init::zeros());
}

// conv 5x5 "same" -> ReLU -> max pool 2x2: (B,in,H,W) -> (B,out,H/2,W/2).
Tensor convBlock(graph::Graph& g, const graph::ParameterStore& store, const std::string& prefix,
                 Tensor x) {
  const Tensor y =
      g.conv2d(x, g.parameter(store.at(prefix + ".w")), g.parameter(store.at(prefix + ".b")),
               ops::Conv2dParams::square(1, kKernel / 2));
  return g.maxPool2d(g.relu(y), ops::Pool2dParams::square(2));
}

}  // namespace

void declareCnn(graph::ParameterStore& store, const VitConfig& config) {
  config.validate();
  declareConv(store, "conv1", 1, config.conv1);
  declareConv(store, "conv2", config.conv1, config.conv2);
  const int64_t side = config.image / 4;
  nn::declareLinear(store, "fc", config.conv2 * side * side, config.hidden);
  nn::declareLinear(store, "head", config.hidden, config.classes);
}

Tensor cnnLogits(graph::Graph& g, const graph::ParameterStore& store, const VitConfig& config,
                 Tensor images) {
  const int64_t batch = g.shape(images)[0], side = config.image / 4;
  Tensor x = g.reshape(images, {batch, 1, config.image, config.image});
  x = convBlock(g, store, "conv1", x);  // (B, conv1, H/2, W/2)
  x = convBlock(g, store, "conv2", x);  // (B, conv2, H/4, W/4)
  x = g.reshape(x, {batch, config.conv2 * side * side});
  x = g.dropout(nn::linear(g, store, "fc", x, ops::Activation::Relu), config.dropout);
  return nn::linear(g, store, "head", x);
}

}  // namespace vkgrad::vit
