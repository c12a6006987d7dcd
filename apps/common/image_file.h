// Reading the images users hand to the apps (vkgrad-vit predict, vkgrad-vae reconstruct).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace vkgrad::apps {

// The image at path (PNG, JPEG, BMP, ...: what stb_image reads) as size x size grey bytes.
// Colour is reduced to grey by stb (luma); a larger image is shrunk by averaging the source
// pixels each target pixel covers (area resampling), a smaller one enlarged bilinearly.
// invert maps v to 255 - v. Throws Error naming the file when it is not an image.
std::vector<uint8_t> readGreyImage(const std::string& path, int size, bool invert);
// The images at paths, one after the other (size * size bytes each).
std::vector<uint8_t> readGreyImages(std::span<const std::string> paths, int size, bool invert);

}  // namespace vkgrad::apps
