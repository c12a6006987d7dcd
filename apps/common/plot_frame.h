// What the plots in common/plot.h share, whatever they draw inside: the drawable points' bounds,
// axes with 1/2/5 ticks (decades on a log axis), the layout of frame, tick labels, axis labels
// and title, the grid, and the legend box.
#pragma once

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "common/canvas.h"
#include "common/plot.h"

namespace vkgrad::apps {

// A point that cannot be drawn (NaN, inf, y <= 0 on a log axis) is skipped.
bool drawable(double x, double y, bool log_y);

// The extent of the drawable points.
struct Bounds {
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  void add(double x, double y);
};

// Throws std::runtime_error("<where><kind> '<label>' has 3 x but 2 y values") unless nx == ny.
void checkLengths(const std::string& where, const std::string& kind, const std::string& label,
                  size_t nx, size_t ny);

struct Tick {
  double at;  // in axis space (log10 of the value on a log axis)
  std::string label;
};

struct Axis {
  double lo = 0, hi = 1;  // axis space
  std::vector<Tick> ticks;
  std::vector<double> minor;  // unlabelled grid lines, axis space
};

// The plots' text at scale s: tick labels and legend 12 px, axis labels 13 px, the title 15 px
// bold.
inline Font tickFont(int s) {
  return {12.0 * s};
}
inline Font labelFont(int s) {
  return {13.0 * s};
}
inline Font titleFont(int s) {
  return {15.0 * s, true};
}

// Axes over the bounds, and where the plot area, ticks, labels and title go.
class PlotFrame {
 public:
  // right_margin: pixels kept free right of the plot area (for a legend outside it). `where`
  // starts each error message. Throws std::runtime_error when the bounds are empty (nothing
  // drawable), when their range overflows a double, or when the size leaves no room to plot.
  PlotFrame(const std::string& where, const Bounds& bounds, const PlotOptions& options,
            int right_margin = 0);

  Rect plot() const { return plot_; }   // the data area inside the frame
  int scale() const { return scale_; }  // 1, or more on large pictures: text, pads, marks grow
  // Data to continuous canvas coordinates.
  double px(double x) const;
  double py(double y) const;

  Canvas blankCanvas() const;           // white, the options' size, with the grid drawn
  void drawAxes(Canvas& canvas) const;  // last: frame, ticks, labels and title over everything

 private:
  void drawGrid(Canvas& canvas) const;

  PlotOptions options_;
  Axis xa_, ya_;
  Rect plot_;
  int scale_;
};

struct LegendEntry {
  enum class Mark { Line, LineAndSquare, Dot };
  std::string label;
  Rgb colour;
  Mark mark;
};

// The legend box's size for the entries at this scale (PlotFrame::scale, its text in
// tickFont), and its six candidate places inside the plot area: the corners, top right first
// (loss curves fall from the top left), then the middles of the right and left edges (where
// curves that flatten out early leave room).
struct LegendSize {
  int w = 0, h = 0;
};
LegendSize legendSize(const std::vector<LegendEntry>& entries, int scale);
std::array<Rect, 6> legendPlaces(Rect plot, LegendSize size, int scale);
// The box's place right of the plot area, and the right_margin PlotFrame must keep for it.
Rect legendOutside(Rect plot, LegendSize size, int scale);
int legendOutsideMargin(LegendSize size, int scale);

// A bordered white box with one row per labelled entry: its mark (a line of line_width, with a
// square for LineAndSquare; an opaque dot for Dot) and its label.
void drawLegend(Canvas& canvas, const std::vector<LegendEntry>& entries, Rect box, int scale,
                double line_width);

}  // namespace vkgrad::apps
