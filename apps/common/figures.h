// The classifier pictures the apps write: a confusion matrix and a captioned grid of images,
// drawn on a Canvas (common/canvas.h) and written as PNG.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace vkgrad::apps {

// counts[t * classes + p]: images of true class t predicted as p; names: one per class.
// Each row is shaded by its share of the true class (white 0 .. dark blue 1) and each cell
// shows its count; rows are true classes, columns predictions, with per-class accuracy at
// the right. Throws std::runtime_error on mismatched sizes or an unwritable path.
void writeConfusionPng(const std::filesystem::path& path, std::span<const uint64_t> counts,
                       const std::vector<std::string>& names, const std::string& title);

struct GridImage {
  std::span<const uint8_t> pixels;  // rows * cols grey values, row-major
  std::string caption;              // under the image
  bool marked = false;              // drawn with a red frame and red caption (a wrong guess)
};

// Images of rows x cols pixels, each scaled up `zoom` times (nearest neighbour: every pixel a
// sharp zoom x zoom block), `per_row` to a row, with their captions; without any caption or
// mark the tiles sit 2 pixels apart (a mosaic). Throws
// std::runtime_error on a bad size or an unwritable path.
void writeImageGridPng(const std::filesystem::path& path, const std::vector<GridImage>& images,
                       int rows, int cols, int per_row, int zoom, const std::string& title);

}  // namespace vkgrad::apps
