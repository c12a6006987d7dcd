// A small convolutional network for the same images and data path as the ViT
// (VitConfig::kind == ModelKind::Cnn, `vkgrad-vit train --model cnn`), the two-convolution
// network of the Fashion-MNIST benchmarks:
//
//   (B,1,H,W) -> conv 5x5 (conv1 channels, "same") -> ReLU -> max pool 2x2
//             -> conv 5x5 (conv2 channels, "same") -> ReLU -> max pool 2x2
//             -> linear (conv2·H/4·W/4 -> hidden) -> ReLU -> dropout -> linear (hidden -> classes)
//
// Parameter names: conv1.{w,b} (conv1, 1, 5, 5), conv2.{w,b} (conv2, conv1, 5, 5),
// fc.{w,b} (conv2·H/4·W/4, hidden), head.{w,b} (hidden, classes). The flattening is NCHW's
// (channel, row, column), as PyTorch's flatten of the same tensor.
#pragma once

#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vit/vit.h"

namespace vkgrad::vit {

// Convolution weights He-uniform (bound sqrt(6 / fan_in): ReLU layers), linear weights
// xavier-uniform, biases 0. Call store.initialize(seed) afterwards.
void declareCnn(graph::ParameterStore& store, const VitConfig& config);

// images: (B, image, image) f32, normalised (and augmented) as vitLogits makes them ->
// logits (B, classes).
graph::Tensor cnnLogits(graph::Graph& g, const graph::ParameterStore& store,
                        const VitConfig& config, graph::Tensor images);

}  // namespace vkgrad::vit
