#include "common/figures.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "common/canvas.h"

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
  const Font text{12.0}, axis{13.0}, heading{15.0, true};
  const TextSize line = measureText("", text), axis_line = measureText("", axis);
  const double digits = digitHeight(text);
  double label_w = 0;
  for (const std::string& name : names) label_w = std::max(label_w, measureText(name, text).width);
  const int pad = 12, gap = 8, cell = 56;
  const int title_h =
      int(std::ceil(measureText("", heading).ascent + measureText("", heading).descent));
  const int axis_h = int(std::ceil(axis_line.ascent + axis_line.descent));
  // Column names stand upright above the grid, row names to its left, accuracy to its right.
  const int left = pad + axis_h + gap + int(std::ceil(label_w)) + gap;
  const int top = pad + title_h + pad + axis_h + gap + int(std::ceil(label_w)) + gap;
  const int acc_w = int(
      std::ceil(std::max(measureText("accuracy", text).width, measureText("100.0%", text).width)));
  const int width = std::max(left + n * cell + gap + acc_w + pad,
                             pad + int(std::ceil(measureText(title, heading).width)) + pad);
  Canvas canvas(width, top + n * cell + pad, kWhite);
  canvas.text(pad, pad + measureText("", heading).ascent, title, heading, kBlack);
  const double grid_mid_x = left + 0.5 * n * cell, grid_mid_y = top + 0.5 * n * cell;
  canvas.textUp(pad + axis_line.ascent, grid_mid_y, "true class", axis, kGrey);
  canvas.text(grid_mid_x, pad + title_h + pad + axis_line.ascent, "predicted", axis, kGrey,
              Align::Centre);
  canvas.text(left + n * cell + gap, top - gap - line.descent, "accuracy", text, kGrey);
  for (int t = 0; t < n; ++t) {
    uint64_t row = 0;
    for (int p = 0; p < n; ++p) row += counts[size_t(t * n + p)];
    const double row_baseline = top + t * cell + 0.5 * (cell + digits);
    canvas.text(left - gap, row_baseline, names[size_t(t)], text, kBlack, Align::Right);
    canvas.textUp(left + t * cell + 0.5 * (cell + digits), top - gap, names[size_t(t)], text,
                  kBlack, Align::Left);
    for (int p = 0; p < n; ++p) {
      const uint64_t c = counts[size_t(t * n + p)];
      const double share = row ? double(c) / double(row) : 0.0;
      const Rect r{left + p * cell, top + t * cell, left + (p + 1) * cell, top + (t + 1) * cell};
      canvas.fill(r, shade(share));
      canvas.text(r.x0 + 0.5 * cell, row_baseline, std::to_string(c), text,
                  share > 0.5 ? kWhite : kBlack, Align::Centre);
    }
    char acc[32];
    std::snprintf(acc, sizeof acc, "%.1f%%",
                  row ? 100.0 * double(counts[size_t(t * n + t)]) / double(row) : 0.0);
    canvas.text(left + n * cell + gap, row_baseline, acc, text, kBlack);
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
  const Font caption{12.0}, heading{15.0, true};
  double caption_w = 0;
  bool marks = false;
  for (const GridImage& im : images) {
    if (im.pixels.size() != size_t(rows) * size_t(cols))
      throw std::runtime_error("writeImageGridPng(" + path.string() + "): an image of " +
                               std::to_string(im.pixels.size()) + " pixels, not " +
                               std::to_string(rows) + "x" + std::to_string(cols));
    if (!im.caption.empty())
      caption_w = std::max(caption_w, measureText(im.caption, caption).width);
    marks = marks || im.marked;
  }
  // Without captions or marks the tiles sit close together: a mosaic (samples, manifolds).
  const bool mosaic = caption_w == 0 && !marks;
  const TextSize line = measureText("", caption), head_line = measureText("", heading);
  const int pad = mosaic ? 1 : 8;
  const int text_h = mosaic ? 0 : int(std::ceil(line.ascent + line.descent)) + 2;
  const int tile_w = std::max(cols * zoom, int(std::ceil(caption_w))) + 2 * pad;
  const int tile_h = rows * zoom + text_h + 2 * pad;
  const int across = int(std::min(images.size(), size_t(per_row)));
  const int grid_rows = int((images.size() + size_t(per_row) - 1) / size_t(per_row));
  const int margin = 8;  // around the grid and the title
  const int head =
      title.empty() ? margin : margin + int(std::ceil(head_line.ascent + head_line.descent)) + 4;
  const int width = std::max(2 * margin + across * tile_w,
                             2 * margin + int(std::ceil(measureText(title, heading).width)));
  const int x_grid = (width - across * tile_w) / 2;
  Canvas canvas(width, head + grid_rows * tile_h + margin - pad, kWhite);
  canvas.text(margin, margin + head_line.ascent, title, heading, kBlack);
  for (size_t i = 0; i < images.size(); ++i) {
    const GridImage& im = images[i];
    const int tile_x = x_grid + int(i % size_t(per_row)) * tile_w;
    const int x0 = tile_x + (tile_w - cols * zoom) / 2;
    const int y0 = head + int(i / size_t(per_row)) * tile_h + pad;
    if (im.marked) canvas.fill({x0 - 3, y0 - 3, x0 + cols * zoom + 3, y0 + rows * zoom + 3}, kRed);
    canvas.greyImage(x0, y0, im.pixels, rows, cols, zoom);
    if (!mosaic)
      canvas.text(tile_x + 0.5 * tile_w, y0 + rows * zoom + 2 + line.ascent, im.caption, caption,
                  im.marked ? kRed : kBlack, Align::Centre);
  }
  writePng(path, canvas);
}

}  // namespace vkgrad::apps
