// What vkgrad-vit reports about a classifier: the confusion matrix as text and JSON, the
// pictures of a trained model, and the header of a training run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/data/idx.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vit/classifier.h"
#include "vkgrad/vit/vit.h"

namespace vkgrad::apps {

std::string percent(double fraction);  // "81.20%"
void printConfusion(const vit::Confusion& c, const std::vector<std::string>& names);
// {"accuracy", "images", "per_class": [{"class", "accuracy"}], "confusion": rows}.
graph::Json confusionJson(const vit::Confusion& c, const std::vector<std::string>& names);
// DIR/confusion.png and DIR/predictions.png (the first test images, the wrong ones framed);
// returns their names.
std::vector<std::string> writePictures(const std::filesystem::path& dir, vk::Context& context,
                                       const graph::ParameterStore& store,
                                       const vit::VitConfig& config, const data::Images& images,
                                       std::span<const uint8_t> labels,
                                       const std::vector<std::string>& names,
                                       const vit::Confusion& confusion);
// The device, the data and the model, on stderr.
void printHeader(const vk::Context& context, const std::string& data, const data::ImageDataset& set,
                 const graph::ParameterStore& store, const vit::VitConfig& config);

}  // namespace vkgrad::apps
