// Line and scatter plots written as PNG: the apps' loss curves (vkgrad-gpt train writes
// loss.png) and a VAE's latent space. Drawn on a cairo canvas (common/canvas.h) with a frame,
// 1/2/5 ticks, grid, labels and a legend (common/plot_frame.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "common/canvas.h"

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
// The same picture as a canvas (vkgrad-play's loss panel), with the same errors but the
// file's.
Canvas drawLinePlot(const std::vector<Series>& series, const PlotOptions& options);

// Points drawn as small filled dots, one colour per group, with a legend of the group labels
// (for a VAE's 2-D latent space: the test set's means coloured by class). Same file rules and
// errors as writeLinePlot (temporary file renamed over path; std::runtime_error when nothing
// is drawable or x/y lengths differ).
struct PointGroup {
  std::string label;         // shown in the legend unless empty
  std::vector<double> x, y;  // same length; points that cannot be drawn are skipped
  unsigned char rgb[3] = {31, 119, 180};
};
// Dots are anti-aliased discs of radius 1.5 px (times the plot's scale), blended with an opacity
// that falls as the points grow (0.9 up to 1,000 points, 0.45 from 4,000), drawn in an order
// that interleaves the groups. The legend sits in the first of its places in the plot (the
// corners, top right first, then the middles of the right and left edges) that hides no dot,
// else right of the plot area.
void writeScatterPlot(const std::filesystem::path& path, const std::vector<PointGroup>& groups,
                      const PlotOptions& options);

// Ten well-separated colours for classes (a categorical palette such as the common
// "tab10" colours), index mod 10.
const unsigned char* categoricalColour(int index);

}  // namespace vkgrad::apps
