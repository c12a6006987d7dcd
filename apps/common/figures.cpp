#include "common/figures.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "common/raster.h"

namespace vkgrad::apps {
namespace {

constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0}, kGrey{110, 110, 110}, kRed{200, 30, 30};

// White to a dark blue, by t in [0, 1].
Rgb shade(double t) {
  t = std::clamp(t, 0.0, 1.0);
  auto mix = [t](int a, int b) { return static_cast<unsigned char>(a + (b - a) * t + 0.5); };
  return {mix(255, 8), mix(255, 48), mix(255, 107)};
}

}  // namespace

void writeConfusionPng(const std::filesystem::path& path, std::span<const uint64_t> counts,
                       const std::vector<std::string>& names, const std::string& title) {
  const int n = int(names.size());
  if (n == 0 || counts.size() != size_t(n) * size_t(n))
    throw std::runtime_error("writeConfusionPng(" + path.string() +
                             "): " + std::to_string(counts.size()) + " counts for " +
                             std::to_string(n) + " classes");
  const int scale = 2, cell = 56, text_h = kTextHeight * scale;
  int label_w = 0;
  for (const std::string& name : names) label_w = std::max(label_w, textWidth(name, scale));
  const int left = label_w + 24 + text_h, top = 40 + text_h + label_w + 16;
  const int right = 110, bottom = 20;
  Canvas canvas(left + n * cell + right, top + n * cell + bottom, kWhite);
  drawText(canvas, 12, 12, title, kBlack, scale);
  drawTextUp(canvas, 8, top + n * cell / 2 + textWidth("true class", scale) / 2, "true class",
             kGrey, scale);
  drawText(canvas, left + n * cell / 2 - textWidth("predicted", scale) / 2, 40, "predicted", kGrey,
           scale);
  for (int t = 0; t < n; ++t) {
    uint64_t row = 0;
    for (int p = 0; p < n; ++p) row += counts[size_t(t * n + p)];
    drawText(canvas, left - 8 - textWidth(names[size_t(t)], scale),
             top + t * cell + (cell - text_h) / 2, names[size_t(t)], kBlack, scale);
    drawTextUp(canvas, left + t * cell + (cell - text_h) / 2, top - 8, names[size_t(t)], kBlack,
               scale);
    for (int p = 0; p < n; ++p) {
      const uint64_t c = counts[size_t(t * n + p)];
      const double share = row ? double(c) / double(row) : 0.0;
      const Rect r{left + p * cell, top + t * cell, left + (p + 1) * cell, top + (t + 1) * cell};
      canvas.fill(r, shade(share));
      const std::string text = std::to_string(c);
      drawText(canvas, r.x0 + (cell - textWidth(text, scale)) / 2, r.y0 + (cell - text_h) / 2, text,
               share > 0.5 ? kWhite : kBlack, scale);
    }
    char acc[32];
    std::snprintf(acc, sizeof acc, "%.1f%%",
                  row ? 100.0 * double(counts[size_t(t * n + t)]) / double(row) : 0.0);
    drawText(canvas, left + n * cell + 10, top + t * cell + (cell - text_h) / 2, acc, kBlack,
             scale);
  }
  // Cell borders: one pixel lines between rows and columns.
  for (int i = 0; i <= n; ++i) {
    canvas.fill({left, top + i * cell, left + n * cell + 1, top + i * cell + 1}, kGrey);
    canvas.fill({left + i * cell, top, left + i * cell + 1, top + n * cell + 1}, kGrey);
  }
  writePng(path, canvas);
}

void writeImageGridPng(const std::filesystem::path& path, const std::vector<GridImage>& images,
                       int rows, int cols, int per_row, int zoom, const std::string& title) {
  if (images.empty() || rows <= 0 || cols <= 0 || per_row <= 0 || zoom <= 0)
    throw std::runtime_error("writeImageGridPng(" + path.string() + "): nothing to draw");
  const int scale = 1;
  int caption_w = 0;
  bool marks = false;
  for (const GridImage& im : images) {
    if (im.pixels.size() != size_t(rows) * size_t(cols))
      throw std::runtime_error("writeImageGridPng(" + path.string() + "): an image of " +
                               std::to_string(im.pixels.size()) + " pixels, not " +
                               std::to_string(rows) + "x" + std::to_string(cols));
    caption_w = std::max(caption_w, textWidth(im.caption, scale));
    marks = marks || im.marked;
  }
  // Without captions or marks the tiles sit close together: a mosaic (samples, manifolds).
  const bool mosaic = caption_w == 0 && !marks;
  const int text_h = mosaic ? 0 : kTextHeight * scale + 4, pad = mosaic ? 1 : 8;
  const int tile_w = std::max(cols * zoom, caption_w) + 2 * pad;
  const int tile_h = rows * zoom + text_h + 2 * pad;
  const int grid_rows = int((images.size() + size_t(per_row) - 1) / size_t(per_row));
  const int head = 16 + kTextHeight * 2 + 8;
  Canvas canvas(per_row * tile_w, head + grid_rows * tile_h, kWhite);
  drawText(canvas, 8, 12, title, kBlack, 2);
  for (size_t i = 0; i < images.size(); ++i) {
    const GridImage& im = images[i];
    const int x0 = int(i % size_t(per_row)) * tile_w + (tile_w - cols * zoom) / 2;
    const int y0 = head + int(i / size_t(per_row)) * tile_h + pad;
    if (im.marked) canvas.fill({x0 - 3, y0 - 3, x0 + cols * zoom + 3, y0 + rows * zoom + 3}, kRed);
    for (int y = 0; y < rows; ++y)
      for (int x = 0; x < cols; ++x) {
        const unsigned char v = im.pixels[size_t(y * cols + x)];
        canvas.fill({x0 + x * zoom, y0 + y * zoom, x0 + (x + 1) * zoom, y0 + (y + 1) * zoom},
                    {v, v, v});
      }
    const int tx = int(i % size_t(per_row)) * tile_w + (tile_w - textWidth(im.caption, scale)) / 2;
    if (!mosaic)
      drawText(canvas, tx, y0 + rows * zoom + 6, im.caption, im.marked ? kRed : kBlack, scale);
  }
  writePng(path, canvas);
}

}  // namespace vkgrad::apps
