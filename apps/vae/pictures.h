// vkgrad-vae's pictures: what a trained model makes of the test set and of points of its
// latent space.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "common/figures.h"
#include "vkgrad/data/idx.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vae/vae.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::apps {

// count points of N(0, I) in `latent` dimensions.
std::vector<float> normalPoints(int64_t count, int64_t latent, uint64_t seed);
// Images of `image` bytes each, as grid cells without captions.
std::vector<GridImage> tiles(const std::vector<uint8_t>& pixels, size_t image);
// Reconstructions and samples always; for a 2-D latent the test set's means by class and the
// decoder's manifold, otherwise interpolations. Returns the names written in `out`.
std::vector<std::string> writePictures(const std::filesystem::path& out, vk::Context& context,
                                       const graph::ParameterStore& store,
                                       const vae::VaeConfig& config, const data::Images& images,
                                       std::span<const uint8_t> labels,
                                       const std::vector<std::string>& names, uint64_t seed);

}  // namespace vkgrad::apps
