// Line plots written as PNG, for the apps' loss curves (vkgrad-gpt train writes loss.png). Drawn
// here into an RGB image (common/raster.h) with a frame, 1/2/5 ticks, grid, labels and a legend
// (common/plot_frame.h); stb writes the PNG.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace vkgrad::apps {

struct Series {
  std::string label;         // shown in the legend
  std::vector<double> x, y;  // same length; points in drawing order. A point that cannot
                             // be drawn (NaN, inf, y <= 0 on a log axis) breaks the line.
  unsigned char rgb[3] = {31, 119, 180};
  bool markers = false;  // a small square at every point (sparse series)
};

struct PlotOptions {
  std::string title, x_label, y_label;
  int width = 800, height = 500;  // pixels
  bool log_y = false;             // y on a log10 axis; y <= 0 is skipped like NaN
};

// Writes the series to `path` as a PNG, through a temporary file beside it renamed over it,
// so `path` never holds half a plot. Later series draw over earlier ones; labelled ones get a
// legend entry. Throws std::runtime_error naming the path when it cannot be written, when
// there is nothing to draw (no drawable point), when x and y differ in length, or when the
// size leaves no room for the plot.
void writeLinePlot(const std::filesystem::path& path, const std::vector<Series>& series,
                   const PlotOptions& options);

}  // namespace vkgrad::apps
