#include "common/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/plot_frame.h"
#include "common/raster.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;

// splitmix64's finaliser: a fixed, well-mixed order for the scatter plot's points.
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

void writeLinePlot(const fs::path& path, const std::vector<Series>& series,
                   const PlotOptions& options) {
  const std::string where = "writeLinePlot(" + path.string() + "): ";
  Bounds bounds;
  for (const Series& se : series) {
    checkLengths(where, "series", se.label, se.x.size(), se.y.size());
    for (size_t i = 0; i < se.x.size(); ++i)
      if (drawable(se.x[i], se.y[i], options.log_y)) bounds.add(se.x[i], se.y[i]);
  }
  const PlotFrame frame(where, bounds, options);
  const Rect p = frame.plot();
  const int s = frame.scale();
  Canvas canvas = frame.blankCanvas();
  const double line_width = 1.0 + s;
  std::vector<Coverage> masks;
  for (const Series& se : series) {
    Coverage& mask = masks.emplace_back(options.width, options.height);
    const size_t n = se.x.size();
    auto ok = [&](size_t i) { return i < n && drawable(se.x[i], se.y[i], options.log_y); };
    for (size_t i = 0; i < n; ++i) {
      if (!ok(i)) continue;  // a gap: neither neighbouring segment is drawn
      const double x = frame.px(se.x[i]), y = frame.py(se.y[i]);
      if (ok(i + 1))
        mask.stroke(x, y, frame.px(se.x[i + 1]), frame.py(se.y[i + 1]), line_width);
      else if (i == 0 || !ok(i - 1))
        mask.stroke(x, y, x, y, 2 * line_width);  // lone point: a dot
      if (se.markers) mask.square(x, y, 2.5 * s);
    }
    canvas.composite(mask, {se.rgb[0], se.rgb[1], se.rgb[2]}, p);
  }

  std::vector<LegendEntry> entries;
  for (const Series& se : series)
    entries.push_back({se.label,
                       {se.rgb[0], se.rgb[1], se.rgb[2]},
                       se.markers ? LegendEntry::Mark::LineAndSquare : LegendEntry::Mark::Line});
  // The corner covering the least ink wins; ties go to the earlier (top right) corner.
  Rect box{};
  double least = 1e300;
  for (const Rect& c : legendCorners(p, legendSize(entries, s), s)) {
    double ink = 0;
    for (const Coverage& m : masks) ink += m.density(c);
    if (ink < least - 1e-9) least = ink, box = c;
  }
  drawLegend(canvas, entries, box, s, line_width);
  frame.drawAxes(canvas);
  writePng(path, canvas);
}

void writeScatterPlot(const fs::path& path, const std::vector<PointGroup>& groups,
                      const PlotOptions& options) {
  const std::string where = "writeScatterPlot(" + path.string() + "): ";
  Bounds bounds;
  // Every drawable point as (draw order key, group, index). Sorting by a hash interleaves the
  // groups, so where classes overlap none is buried under the ones listed after it.
  struct Point {
    uint64_t key;
    uint32_t group, index;
  };
  std::vector<Point> points;
  for (size_t g = 0; g < groups.size(); ++g) {
    const PointGroup& pg = groups[g];
    checkLengths(where, "group", pg.label, pg.x.size(), pg.y.size());
    for (size_t i = 0; i < pg.x.size(); ++i) {
      if (!drawable(pg.x[i], pg.y[i], options.log_y)) continue;
      bounds.add(pg.x[i], pg.y[i]);
      points.push_back({mix((uint64_t(g) << 32) | i), uint32_t(g), uint32_t(i)});
    }
  }
  std::sort(points.begin(), points.end(),
            [](const Point& a, const Point& b) { return a.key < b.key; });

  PlotFrame frame(where, bounds, options);
  const int s = frame.scale();
  const double radius = 1.5 * s;
  std::vector<LegendEntry> entries;
  for (const PointGroup& pg : groups)
    entries.push_back({pg.label, {pg.rgb[0], pg.rgb[1], pg.rgb[2]}, LegendEntry::Mark::Dot});
  const LegendSize size = legendSize(entries, s);
  // The legend goes in the first corner (top right first) that hides no dot, else right of
  // the plot area: a legend over data hides exactly the outliers one looks for.
  auto hides = [&](const Rect& box) {
    for (const Point& pt : points) {
      const PointGroup& pg = groups[pt.group];
      const double x = frame.px(pg.x[pt.index]), y = frame.py(pg.y[pt.index]);
      if (x + radius > box.x0 && x - radius < box.x1 && y + radius > box.y0 && y - radius < box.y1)
        return true;
    }
    return false;
  };
  Rect box{};
  if (size.h > 0) {
    const auto corners = legendCorners(frame.plot(), size, s);
    const auto free =
        std::find_if(corners.begin(), corners.end(), [&](const Rect& c) { return !hides(c); });
    if (free != corners.end()) {
      box = *free;
    } else {
      frame = PlotFrame(where, bounds, options, legendOutsideMargin(size, s));
      box = legendOutside(frame.plot(), size, s);
    }
  }

  // Opacity falls as the points grow, so that a dense core takes several overlapping dots to
  // saturate: 0.9 up to 1,000 points, falling to a floor of 0.45 at 4,000. At 10,000 points,
  // 0.3 left lone outliers too pale to see and 0.6 merged overlapping classes into one smear.
  const double alpha = std::clamp(0.9 * std::sqrt(1000.0 / double(points.size())), 0.45, 0.9);
  Canvas canvas = frame.blankCanvas();
  for (const Point& pt : points) {
    const PointGroup& pg = groups[pt.group];
    canvas.dot(frame.px(pg.x[pt.index]), frame.py(pg.y[pt.index]), radius,
               {pg.rgb[0], pg.rgb[1], pg.rgb[2]}, float(alpha), frame.plot());
  }
  drawLegend(canvas, entries, box, s, 1.0 + s);
  frame.drawAxes(canvas);
  writePng(path, canvas);
}

const unsigned char* categoricalColour(int index) {
  // Tableau 10 ("tab10" in matplotlib): ten hues of similar weight that stay apart on white.
  static constexpr unsigned char kTab10[10][3] = {
      {31, 119, 180}, {255, 127, 14},  {44, 160, 44},   {214, 39, 40},  {148, 103, 189},
      {140, 86, 75},  {227, 119, 194}, {127, 127, 127}, {188, 189, 34}, {23, 190, 207}};
  return kTab10[(index % 10 + 10) % 10];
}

}  // namespace vkgrad::apps
