#include "common/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/canvas.h"
#include "common/plot_frame.h"

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

namespace {

// The series' drawable points in canvas coordinates, cut into runs at the points that cannot
// be drawn.
std::vector<std::vector<Point>> runs(const Series& se, const PlotFrame& frame, bool log_y) {
  std::vector<std::vector<Point>> out(1);
  for (size_t i = 0; i < se.x.size(); ++i) {
    if (drawable(se.x[i], se.y[i], log_y))
      out.back().push_back({frame.px(se.x[i]), frame.py(se.y[i])});
    else if (!out.back().empty())
      out.emplace_back();
  }
  if (out.back().empty()) out.pop_back();
  return out;
}

// How much of the lines lies in r grown by `reach`: samples a pixel apart along each segment.
// The legend goes in the place where this is least.
size_t inkIn(const std::vector<std::vector<Point>>& lines, Rect r, double reach) {
  size_t hits = 0;
  auto inside = [&](double x, double y) {
    return x > r.x0 - reach && x < r.x1 + reach && y > r.y0 - reach && y < r.y1 + reach;
  };
  for (const std::vector<Point>& line : lines) {
    if (line.size() == 1) hits += inside(line[0].x, line[0].y);
    for (size_t i = 0; i + 1 < line.size(); ++i) {
      const Point a = line[i], b = line[i + 1];
      const int steps = 1 + int(std::hypot(b.x - a.x, b.y - a.y));
      for (int k = 0; k < steps; ++k) {
        const double t = double(k) / steps;
        hits += inside(a.x + t * (b.x - a.x), a.y + t * (b.y - a.y));
      }
    }
  }
  return hits;
}

Canvas linePlot(const std::string& where, const std::vector<Series>& series,
                const PlotOptions& options) {
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
  std::vector<std::vector<Point>> all;
  for (const Series& se : series) {
    const Rgb colour{se.rgb[0], se.rgb[1], se.rgb[2]};
    for (const std::vector<Point>& run : runs(se, frame, options.log_y)) {
      if (run.size() == 1)
        canvas.dot(run[0], line_width, colour, 1.0, p);  // a lone point: a dot, not nothing
      else
        canvas.polyline(run, line_width, colour, p);
      if (se.markers)
        for (const Point& q : run) canvas.square(q, 2.5 * s, colour, p);
      all.push_back(run);
    }
  }

  std::vector<LegendEntry> entries;
  for (const Series& se : series)
    entries.push_back({se.label,
                       {se.rgb[0], se.rgb[1], se.rgb[2]},
                       se.markers ? LegendEntry::Mark::LineAndSquare : LegendEntry::Mark::Line});
  // The place covering the least ink wins; ties go to the earlier (top right first).
  Rect box{};
  size_t least = SIZE_MAX;
  for (const Rect& c : legendPlaces(p, legendSize(entries, s), s))
    if (const size_t ink = inkIn(all, c, line_width); ink < least) least = ink, box = c;
  drawLegend(canvas, entries, box, s, line_width);
  frame.drawAxes(canvas);
  return canvas;
}

}  // namespace

Canvas drawLinePlot(const std::vector<Series>& series, const PlotOptions& options) {
  return linePlot("drawLinePlot: ", series, options);
}

void writeLinePlot(const fs::path& path, const std::vector<Series>& series,
                   const PlotOptions& options) {
  writePng(path, linePlot("writeLinePlot(" + path.string() + "): ", series, options));
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
  // The legend goes in the first place (top right first) that hides no dot, else right of
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
    const auto places = legendPlaces(frame.plot(), size, s);
    const auto free =
        std::find_if(places.begin(), places.end(), [&](const Rect& c) { return !hides(c); });
    if (free != places.end()) {
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
    canvas.dot({frame.px(pg.x[pt.index]), frame.py(pg.y[pt.index])}, radius,
               {pg.rgb[0], pg.rgb[1], pg.rgb[2]}, alpha, frame.plot());
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
