#include "common/image_file.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include <stb_image.h>

#include "vkgrad/core/error.h"
#include "vkgrad/io/input_file.h"

namespace vkgrad::apps {
namespace {

// Area resampling: target pixel (x, y) averages the source rectangle it covers, weighting
// the partly covered source pixels at its edges by their covered fraction.
double areaSample(const unsigned char* src, int w, int h, double x0, double y0, double x1,
                  double y1) {
  double sum = 0, weight = 0;
  for (int sy = int(std::floor(y0)); sy < int(std::ceil(y1)); ++sy) {
    const double wy = std::min(y1, sy + 1.0) - std::max(y0, double(sy));
    for (int sx = int(std::floor(x0)); sx < int(std::ceil(x1)); ++sx) {
      const double wx = std::min(x1, sx + 1.0) - std::max(x0, double(sx));
      sum += wx * wy *
             src[size_t(std::clamp(sy, 0, h - 1)) * size_t(w) + size_t(std::clamp(sx, 0, w - 1))];
      weight += wx * wy;
    }
  }
  return weight > 0 ? sum / weight : 0.0;
}

double bilinear(const unsigned char* src, int w, int h, double x, double y) {
  x = std::clamp(x, 0.0, double(w - 1));
  y = std::clamp(y, 0.0, double(h - 1));
  const int x0 = int(x), y0 = int(y), x1 = std::min(x0 + 1, w - 1), y1 = std::min(y0 + 1, h - 1);
  const double fx = x - x0, fy = y - y0;
  auto at = [&](int xx, int yy) { return double(src[size_t(yy) * size_t(w) + size_t(xx)]); };
  return (1 - fy) * ((1 - fx) * at(x0, y0) + fx * at(x1, y0)) +
         fy * ((1 - fx) * at(x0, y1) + fx * at(x1, y1));
}

}  // namespace

std::vector<uint8_t> readGreyImage(const std::string& path, int size, bool invert) {
  graph::checkInputFile(path, "an image");
  int w = 0, h = 0, channels = 0;
  std::unique_ptr<unsigned char, void (*)(void*)> src(stbi_load(path.c_str(), &w, &h, &channels, 1),
                                                      stbi_image_free);
  if (!src) throw Error(path + ": not an image stb_image can read (" + stbi_failure_reason() + ")");
  std::vector<uint8_t> out(size_t(size) * size_t(size));
  const double sx = double(w) / size, sy = double(h) / size;
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const double v = sx >= 1 && sy >= 1
                           ? areaSample(src.get(), w, h, x * sx, y * sy, (x + 1) * sx, (y + 1) * sy)
                           : bilinear(src.get(), w, h, (x + 0.5) * sx - 0.5, (y + 0.5) * sy - 0.5);
      const int byte = int(std::lround(std::clamp(v, 0.0, 255.0)));
      out[size_t(y) * size_t(size) + size_t(x)] = uint8_t(invert ? 255 - byte : byte);
    }
  return out;
}

std::vector<uint8_t> readGreyImages(std::span<const std::string> paths, int size, bool invert) {
  std::vector<uint8_t> pixels;
  for (const std::string& path : paths) {
    const std::vector<uint8_t> image = readGreyImage(path, size, invert);
    pixels.insert(pixels.end(), image.begin(), image.end());
  }
  return pixels;
}

}  // namespace vkgrad::apps
