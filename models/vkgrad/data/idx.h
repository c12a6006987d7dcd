// IDX files (the format of MNIST and Fashion-MNIST), plain or gzip-compressed, read whole and
// checked: the magic (unsigned bytes, the expected number of dimensions), every size against
// the bytes the file really holds (no truncation, no trailing data), label ranges, and the
// gzip stream itself (zlib checks its CRC). Every failure is a vkgrad::Error naming the file
// and what is wrong; nothing is returned in part.
//
// Layout: a big-endian u32 magic 0x000008NN (0x08: unsigned bytes, NN: dimension count), NN
// big-endian u32 sizes, then the bytes in row-major order.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace vkgrad::data {

// count images of rows x cols pixels, pixel (i, y, x) at pixels[(i * rows + y) * cols + x].
struct Images {
  int64_t count = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;
  int64_t imageBytes() const { return rows * cols; }
};

// An images file: magic 0x00000803 (count, rows, cols), every size at least 1.
Images readIdxImages(const std::string& path);
// A labels file: magic 0x00000801 (count), each label < classes (1..256).
std::vector<uint8_t> readIdxLabels(const std::string& path, int classes = 10);

// A train and a test split; each split's images and labels have the same count, and both
// splits have images of the same size.
struct ImageDataset {
  Images train_images, test_images;
  std::vector<uint8_t> train_labels, test_labels;
};

constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";
// Fashion-MNIST's class names, by label.
inline const char* const kFashionMnistClasses[10] = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

// The four Fashion-MNIST files in dir, {train,t10k}-{images-idx3,labels-idx1}-ubyte, each
// plain or with .gz (the plain one when both exist); every label < classes (a model of fewer
// classes refuses data it cannot predict, naming the file and the label).
ImageDataset loadFashionMnist(const std::string& dir = kFashionMnistDir, int classes = 10);
// loadFashionMnist(dir, classes) for a model of size x size images, the training split cut to
// its first `limit` images (0: all of them). Throws Error naming dir when the images are
// another size.
ImageDataset loadImageSet(const std::string& dir, int64_t size, int64_t limit, int classes = 10);

}  // namespace vkgrad::data
