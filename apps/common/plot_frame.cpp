#include "common/plot_frame.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <tuple>

namespace vkgrad::apps {
namespace {

constexpr Rgb kWhite{255, 255, 255}, kInk{30, 30, 30}, kFrame{70, 70, 70};
constexpr Rgb kGrid{222, 222, 222}, kMinorGrid{240, 240, 240}, kLegendBorder{190, 190, 190};

// "1e+06" -> "1e6", "2.5e-05" -> "2.5e-5": shorter labels leave more room to plot.
std::string shortExponent(std::string s) {
  const size_t e = s.find('e');
  if (e == std::string::npos) return s;
  std::string mant = s.substr(0, e), exp = s.substr(e + 1);
  const bool neg = !exp.empty() && exp[0] == '-';
  if (!exp.empty() && (exp[0] == '+' || exp[0] == '-')) exp.erase(0, 1);
  exp.erase(0, std::min(exp.find_first_not_of('0'), exp.size() - 1));
  return mant + "e" + (neg ? "-" : "") + exp;
}

// Labels for multiples of `step`: enough decimals to tell neighbours apart, exponent form
// where fixed notation would get long.
std::string formatTick(double v, double step, double largest) {
  char buf[64];
  const int decimals = std::max(0, -int(std::floor(std::log10(step) + 1e-9)));
  if (largest >= 1e6 || decimals > 4) {
    std::snprintf(buf, sizeof buf, "%.6g", v);
    return shortExponent(buf);
  }
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// How many labelled ticks an axis wants: 5..8 (6 best) where there is room, fewer on a small
// plot (vkgrad-play's loss panel), where 12 px labels would otherwise touch.
struct TickRange {
  int least, most;
  int best() const { return std::min(6, most); }
};

// An axis of `pixels` with labels at least `spacing` apart.
TickRange tickRange(int pixels, int spacing) {
  const int most = std::clamp(pixels / spacing, 3, 8);
  return {std::min(5, most), most};
}

// How many ticks fit in [lo, hi] at this step, and how far that is from the range we want.
int tickCount(double lo, double hi, double step) {
  return int(std::floor(hi / step) - std::ceil(lo / step)) + 1;
}
int tickPenalty(int count, TickRange want) {
  return count < want.least ? want.least - count : count > want.most ? count - want.most : 0;
}

// The 1/2/5 x 10^k step giving a count in the range (closest to its best when several do).
double niceStep(double lo, double hi, TickRange want) {
  const int k0 = int(std::floor(std::log10(hi - lo)));
  double best = std::pow(10.0, k0);
  int best_score = 1 << 30;
  for (int k = k0 - 2; k <= k0 + 1; ++k) {
    for (double m : {1.0, 2.0, 5.0}) {
      const double step = m * std::pow(10.0, k);
      const int count = tickCount(lo, hi, step);
      const int score = tickPenalty(count, want) * 16 + std::abs(count - want.best());
      if (score < best_score) best = step, best_score = score;
    }
  }
  return best;
}

std::vector<Tick> linearTicks(double lo, double hi, bool log_axis, TickRange want) {
  const double step = niceStep(lo, hi, want);
  const double largest = std::max(std::abs(lo), std::abs(hi));
  std::vector<Tick> ticks;
  for (double i = std::ceil(lo / step); i <= std::floor(hi / step); ++i) {
    const double v = i == 0 ? 0.0 : i * step;  // ceil(-0.3) is -0, which prints as "-0"
    ticks.push_back({log_axis ? std::log10(v) : v, formatTick(v, step, largest)});
  }
  return ticks;
}

// A data range [lo, hi] widened so points do not sit on the frame, and so a single value
// still gets a span to centre in.
std::pair<double, double> padRange(double lo, double hi, bool log_axis) {
  if (hi - lo <= 1e-12 * std::max(std::abs(lo), std::abs(hi))) {
    const double half = log_axis ? 0.5 : (lo == 0 ? 1.0 : 0.1 * std::abs(lo));
    return {lo - half, hi + half};
  }
  const double pad = 0.04 * (hi - lo);
  return {lo - pad, hi + pad};
}

Axis linearAxis(double lo, double hi, TickRange want) {
  Axis axis;
  std::tie(axis.lo, axis.hi) = padRange(lo, hi, false);
  axis.ticks = linearTicks(axis.lo, axis.hi, false, want);
  return axis;
}

// lo, hi: the smallest and largest positive values. Ticks go at powers of ten when the range
// spans enough decades, else at 1/2/5 or 1..9 times powers of ten, else at linear steps.
Axis logAxis(double lo, double hi, TickRange want) {
  Axis axis;
  std::tie(axis.lo, axis.hi) = padRange(std::log10(lo), std::log10(hi), true);
  const double span = axis.hi - axis.lo;
  auto mantissaTicks = [&](std::initializer_list<int> mantissas) {
    std::vector<Tick> ticks;
    for (int k = int(std::floor(axis.lo)); k <= int(std::ceil(axis.hi)); ++k) {
      for (int m : mantissas) {
        const double v = m * std::pow(10.0, k), at = std::log10(v);
        char buf[32];
        std::snprintf(buf, sizeof buf, "%g", v);
        if (at >= axis.lo && at <= axis.hi) ticks.push_back({at, shortExponent(buf)});
      }
    }
    return ticks;
  };
  std::vector<std::vector<Tick>> candidates;
  std::vector<Tick> decades = mantissaTicks({1});
  if (int(decades.size()) > want.most) {  // thin whole decades out to at most want.most labels
    const int stride = (int(decades.size()) + want.most - 1) / want.most;
    std::vector<Tick> thinned;
    for (const Tick& t : decades)
      if (int(std::lround(t.at)) % stride == 0) thinned.push_back(t);
    decades = thinned;
  } else if (decades.size() >= 2 && decades.size() <= 5) {  // denser would be a grey wash
    for (int k = int(std::floor(axis.lo)); k <= int(std::ceil(axis.hi)); ++k)
      for (int m = 2; m <= 9; ++m)
        if (double at = std::log10(m * std::pow(10.0, k)); at > axis.lo && at < axis.hi)
          axis.minor.push_back(at);
  }
  candidates.push_back(decades);
  candidates.push_back(mantissaTicks({1, 2, 5}));
  if (span < 1.5) candidates.push_back(mantissaTicks({1, 2, 3, 4, 5, 6, 7, 8, 9}));
  if (span < 1.0)
    candidates.push_back(linearTicks(std::pow(10.0, axis.lo), std::pow(10.0, axis.hi), true, want));
  size_t best = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const int count = int(candidates[i].size()), best_count = int(candidates[best].size());
    if (tickPenalty(count, want) < tickPenalty(best_count, want)) best = i;
  }
  axis.ticks = candidates[best];
  if (best != 0) axis.minor.clear();  // minor lines only between labelled whole decades
  return axis;
}

}  // namespace

bool drawable(double x, double y, bool log_y) {
  return std::isfinite(x) && std::isfinite(y) && (!log_y || y > 0);
}

void Bounds::add(double x, double y) {
  x0 = std::min(x0, x), x1 = std::max(x1, x);
  y0 = std::min(y0, y), y1 = std::max(y1, y);
}

void checkLengths(const std::string& where, const std::string& kind, const std::string& label,
                  size_t nx, size_t ny) {
  if (nx != ny)
    throw std::runtime_error(where + kind + " '" + label + "' has " + std::to_string(nx) +
                             " x but " + std::to_string(ny) + " y values");
}

PlotFrame::PlotFrame(const std::string& where, const Bounds& b, const PlotOptions& o,
                     int right_margin)
    : options_(o) {
  if (!(b.x0 <= b.x1))
    throw std::runtime_error(where + "nothing to draw (no finite" +
                             (o.log_y ? std::string(", positive") : "") + " point)");
  if (!std::isfinite(b.x1 - b.x0) || (!o.log_y && !std::isfinite(b.y1 - b.y0)))
    throw std::runtime_error(where + "the data's range overflows a double");
  // Before the layout, the plot area is about the picture less 80 pixels across and 60 down.
  const TickRange x_want = tickRange(o.width - 80, 45), y_want = tickRange(o.height - 60, 28);
  xa_ = linearAxis(b.x0, b.x1, x_want);
  ya_ = o.log_y ? logAxis(b.y0, b.y1, y_want) : linearAxis(b.y0, b.y1, y_want);

  const int s = std::max(1, std::min(o.width, o.height) / 450);
  const int pad = 8 * s, tick = 4 * s, gap = 3 * s;
  const TextSize label = measureText("Ag", labelFont(s)), title = measureText("Ag", titleFont(s));
  // Tick labels are digits, signs, '.' and 'e': nothing reaches below the baseline or above a
  // digit, so their boxes are a digit tall.
  const int digits = int(std::ceil(digitHeight(tickFont(s))));
  const int label_h = int(std::ceil(label.ascent + label.descent));
  double y_labels = 0;
  for (const Tick& t : ya_.ticks)
    y_labels = std::max(y_labels, measureText(t.label, tickFont(s)).width);
  const double last_x =
      xa_.ticks.empty() ? 0 : measureText(xa_.ticks.back().label, tickFont(s)).width;
  Rect& r = plot_;
  r.x0 = pad + (o.y_label.empty() ? 0 : label_h + pad) + int(std::ceil(y_labels)) + gap + tick + 1;
  // With no title, the top tick label's upper half still needs room above the frame.
  r.y0 = o.title.empty() ? std::max(pad, digits / 2 + 2 * s)
                         : pad + int(std::ceil(title.ascent + title.descent)) + pad;
  r.x1 = o.width - std::max({2 * pad, int(std::ceil(last_x / 2)) + pad, right_margin});
  r.y1 = o.height - (1 + tick + gap + digits + pad + (o.x_label.empty() ? 0 : label_h + pad));
  scale_ = s;
  if (r.x1 - r.x0 < 32 || r.y1 - r.y0 < 32)
    throw std::runtime_error(where + std::to_string(o.width) + "x" + std::to_string(o.height) +
                             " pixels leaves no room to plot");
}

double PlotFrame::px(double x) const {
  return plot_.x0 + (x - xa_.lo) / (xa_.hi - xa_.lo) * (plot_.x1 - plot_.x0);
}

double PlotFrame::py(double y) const {
  const double at = options_.log_y ? std::log10(y) : y;
  return plot_.y1 - (at - ya_.lo) / (ya_.hi - ya_.lo) * (plot_.y1 - plot_.y0);
}

Canvas PlotFrame::blankCanvas() const {
  Canvas canvas(options_.width, options_.height, kWhite);
  drawGrid(canvas);
  return canvas;
}

void PlotFrame::drawGrid(Canvas& canvas) const {
  const Rect p = plot_;
  auto vertical = [&](double at, Rgb c) {
    const int x = p.x0 + int(std::floor((at - xa_.lo) / (xa_.hi - xa_.lo) * (p.x1 - p.x0)));
    canvas.fill({x, p.y0, x + 1, p.y1}, c);
  };
  auto horizontal = [&](double at, Rgb c) {
    const int y = p.y1 - 1 - int(std::floor((at - ya_.lo) / (ya_.hi - ya_.lo) * (p.y1 - p.y0)));
    canvas.fill({p.x0, y, p.x1, y + 1}, c);
  };
  for (double at : ya_.minor) horizontal(at, kMinorGrid);
  for (const Tick& t : xa_.ticks) vertical(t.at, kGrid);
  for (const Tick& t : ya_.ticks) horizontal(t.at, kGrid);
}

void PlotFrame::drawAxes(Canvas& canvas) const {
  const Rect p = plot_;
  const PlotOptions& o = options_;
  const int s = scale_, pad = 8 * s, tick = 4 * s, gap = 3 * s;
  const double digits = digitHeight(tickFont(s));
  auto col = [&](double at) {
    return p.x0 + int(std::floor((at - xa_.lo) / (xa_.hi - xa_.lo) * (p.x1 - p.x0)));
  };
  auto row = [&](double at) {
    return p.y1 - 1 - int(std::floor((at - ya_.lo) / (ya_.hi - ya_.lo) * (p.y1 - p.y0)));
  };
  canvas.fill({p.x0 - 1, p.y0 - 1, p.x1 + 1, p.y0}, kFrame);
  canvas.fill({p.x0 - 1, p.y1, p.x1 + 1, p.y1 + 1}, kFrame);
  canvas.fill({p.x0 - 1, p.y0, p.x0, p.y1}, kFrame);
  canvas.fill({p.x1, p.y0, p.x1 + 1, p.y1}, kFrame);
  for (const Tick& t : xa_.ticks) {
    const int x = col(t.at);
    canvas.fill({x, p.y1 + 1, x + 1, p.y1 + 1 + tick}, kFrame);
    canvas.text(x + 0.5, p.y1 + 1 + tick + gap + digits, t.label, tickFont(s), kInk, Align::Centre);
  }
  for (const Tick& t : ya_.ticks) {
    const int y = row(t.at);
    canvas.fill({p.x0 - 1 - tick, y, p.x0 - 1, y + 1}, kFrame);
    canvas.text(p.x0 - 1 - tick - gap, y + 0.5 + 0.5 * digits, t.label, tickFont(s), kInk,
                Align::Right);
  }
  if (!o.x_label.empty())
    canvas.text(0.5 * (p.x0 + p.x1), o.height - pad - measureText("", labelFont(s)).descent,
                o.x_label, labelFont(s), kInk, Align::Centre);
  if (!o.y_label.empty())
    canvas.textUp(pad + measureText("", labelFont(s)).ascent, 0.5 * (p.y0 + p.y1), o.y_label,
                  labelFont(s), kInk, Align::Centre);
  if (!o.title.empty())
    canvas.text(0.5 * (p.x0 + p.x1), pad + measureText("", titleFont(s)).ascent, o.title,
                titleFont(s), kInk, Align::Centre);
}

namespace {

// Legend metrics at scale s: inner padding, row pitch, the mark's width, and a dot's radius
// (bigger than a scatter plot's dots, so it reads).
struct LegendMetrics {
  int pad, row, swatch;
  double dot_radius;
};

LegendMetrics legendMetrics(const std::vector<LegendEntry>& entries, int s) {
  const bool lines = std::any_of(entries.begin(), entries.end(), [](const LegendEntry& e) {
    return e.mark != LegendEntry::Mark::Dot;
  });
  const TextSize line = measureText("", tickFont(s));
  return {6 * s, int(std::ceil(line.ascent + line.descent)) + 2 * s, lines ? 22 * s : 8 * s,
          3.0 * s};
}

}  // namespace

LegendSize legendSize(const std::vector<LegendEntry>& entries, int s) {
  int rows = 0;
  double label_w = 0;
  for (const LegendEntry& e : entries)
    if (!e.label.empty())
      ++rows, label_w = std::max(label_w, measureText(e.label, tickFont(s)).width);
  if (rows == 0) return {};
  const LegendMetrics m = legendMetrics(entries, s);
  return {2 * m.pad + m.swatch + m.pad + int(std::ceil(label_w)), 2 * m.pad + rows * m.row - 2 * s};
}

std::array<Rect, 6> legendPlaces(Rect p, LegendSize size, int s) {
  const int inset = 8 * s, w = size.w, h = size.h, mid = (p.y0 + p.y1 - h) / 2;
  return {Rect{p.x1 - inset - w, p.y0 + inset, p.x1 - inset, p.y0 + inset + h},
          Rect{p.x0 + inset, p.y0 + inset, p.x0 + inset + w, p.y0 + inset + h},
          Rect{p.x1 - inset - w, p.y1 - inset - h, p.x1 - inset, p.y1 - inset},
          Rect{p.x0 + inset, p.y1 - inset - h, p.x0 + inset + w, p.y1 - inset},
          Rect{p.x1 - inset - w, mid, p.x1 - inset, mid + h},
          Rect{p.x0 + inset, mid, p.x0 + inset + w, mid + h}};
}

Rect legendOutside(Rect p, LegendSize size, int s) {
  const int gap = 8 * s;
  return {p.x1 + gap, p.y0, p.x1 + gap + size.w, p.y0 + size.h};
}

int legendOutsideMargin(LegendSize size, int s) {
  return 8 * s + size.w + 8 * s;
}

void drawLegend(Canvas& canvas, const std::vector<LegendEntry>& entries, Rect box, int s,
                double line_width) {
  if (legendSize(entries, s).h == 0) return;
  const LegendMetrics m = legendMetrics(entries, s);
  const TextSize line = measureText("", tickFont(s));
  // The mark sits at the height of a lower-case letter's middle.
  const double mark_raise = 0.5 * 0.55 * tickFont(s).px;
  canvas.fill(box, kLegendBorder);
  canvas.fill({box.x0 + 1, box.y0 + 1, box.x1 - 1, box.y1 - 1}, kWhite);
  double baseline = box.y0 + m.pad - s + line.ascent;
  for (const LegendEntry& e : entries) {
    if (e.label.empty()) continue;
    const double mid = std::round(baseline - mark_raise) + 0.5, left = box.x0 + m.pad;
    if (e.mark == LegendEntry::Mark::Dot) {
      canvas.dot({left + 0.5 * m.swatch, mid}, m.dot_radius, e.colour, 1.0, box);
    } else {
      const Point ends[2] = {{left, mid}, {left + m.swatch, mid}};
      canvas.polyline(ends, line_width, e.colour, box);
      if (e.mark == LegendEntry::Mark::LineAndSquare)
        canvas.square({left + 0.5 * m.swatch, mid}, 2.5 * s, e.colour, box);
    }
    canvas.text(box.x0 + 2 * m.pad + m.swatch, baseline, e.label, tickFont(s), kInk);
    baseline += m.row;
  }
}

}  // namespace vkgrad::apps
