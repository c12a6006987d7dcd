#include "common/plot.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/plot_frame.h"
#include "common/raster.h"

namespace vkgrad::apps {

namespace fs = std::filesystem;

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
                       se.markers ? LegendEntry::Mark::kLineAndSquare : LegendEntry::Mark::kLine});
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

}  // namespace vkgrad::apps
