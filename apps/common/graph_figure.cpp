#include "common/graph_figure.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <stdexcept>

#include "common/canvas.h"
#include "common/plot.h"

namespace vkgrad::apps {

std::vector<std::pair<double, double>> layoutGraph(
    int64_t nodes, const std::vector<std::pair<uint32_t, uint32_t>>& edges, uint64_t seed) {
  std::vector<std::pair<double, double>> p(size_t(std::max<int64_t>(nodes, 0)));
  if (nodes <= 0) return p;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (auto& q : p) q = {unit(rng), unit(rng)};
  const double k = std::sqrt(1.0 / double(nodes));  // the ideal edge length in a unit square
  const int iterations = 300;
  std::vector<std::pair<double, double>> move(p.size());
  for (int it = 0; it < iterations; ++it) {
    const double temperature = 0.1 * (1.0 - double(it) / iterations) + 1e-4;
    std::fill(move.begin(), move.end(), std::pair<double, double>{0.0, 0.0});
    for (size_t i = 0; i < p.size(); ++i)  // repulsion k^2 / d between every pair
      for (size_t j = i + 1; j < p.size(); ++j) {
        const double dx = p[i].first - p[j].first, dy = p[i].second - p[j].second;
        const double d2 = std::max(dx * dx + dy * dy, 1e-9), f = k * k / d2;
        move[i].first += dx * f, move[i].second += dy * f;
        move[j].first -= dx * f, move[j].second -= dy * f;
      }
    for (const auto& [a, b] : edges) {  // attraction d^2 / k along each edge
      if (a == b || a >= p.size() || b >= p.size()) continue;
      const double dx = p[a].first - p[b].first, dy = p[a].second - p[b].second;
      const double f = std::sqrt(dx * dx + dy * dy) / k;
      move[a].first -= dx * f, move[a].second -= dy * f;
      move[b].first += dx * f, move[b].second += dy * f;
    }
    for (size_t i = 0; i < p.size(); ++i) {  // a gentle pull to the centre keeps components in
      move[i].first += (0.5 - p[i].first) * 0.05 * double(nodes) * k;
      move[i].second += (0.5 - p[i].second) * 0.05 * double(nodes) * k;
      const double len = std::hypot(move[i].first, move[i].second);
      if (len > temperature) {
        move[i].first *= temperature / len;
        move[i].second *= temperature / len;
      }
      p[i].first += move[i].first;
      p[i].second += move[i].second;
    }
  }
  // Fit the drawing to [0, 1]^2, keeping its aspect.
  double x0 = 1e300, y0 = 1e300, x1 = -1e300, y1 = -1e300;
  for (const auto& [x, y] : p)
    x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  const double span = std::max({x1 - x0, y1 - y0, 1e-9});
  for (auto& [x, y] : p) {
    x = (x - x0) / span + (1.0 - (x1 - x0) / span) / 2;
    y = (y - y0) / span + (1.0 - (y1 - y0) / span) / 2;
  }
  return p;
}

namespace {

// Black text on light fills, white on dark ones (relative luminance, sRGB weights).
Rgb textOn(Rgb fill) {
  const double luma = 0.2126 * fill.r + 0.7152 * fill.g + 0.0722 * fill.b;
  return luma > 140 ? Rgb{0, 0, 0} : Rgb{255, 255, 255};
}

}  // namespace

namespace {

// The legend, right of the drawing: rows of a mark and a label, then a note.
struct Legend {
  static constexpr int kRowHeight = 26;
  struct Row {
    std::string label;
    Rgb fill;
    std::optional<Rgb> ring;
    double ring_radius;
  };
  std::vector<Row> rows;
  int width = 0, height = 0;
};

Legend graphLegend(const std::vector<std::string>& class_names, const Font& text, int pad) {
  const Rgb black{0, 0, 0}, grey{170, 170, 170}, red{214, 39, 40};
  Legend legend;
  for (size_t c = 0; c < class_names.size(); ++c) {
    const unsigned char* rgb = categoricalColour(int(c));
    legend.rows.push_back({class_names[c], {rgb[0], rgb[1], rgb[2]}, std::nullopt, 0});
  }
  legend.rows.push_back({"labelled (trained on)", grey, black, 9.5});
  legend.rows.push_back({"predicted wrong", grey, red, 11.5});
  double widest = measureText("colour: predicted class", text).width;
  for (const Legend::Row& r : legend.rows)
    widest = std::max(widest, 24 + measureText(r.label, text).width);
  legend.width = int(std::ceil(widest)) + 2 * pad;
  legend.height = int(legend.rows.size() + 1) * Legend::kRowHeight;
  return legend;
}

// Draws the legend with its first row's top at (x, y).
void drawLegend(Canvas& canvas, const Legend& legend, double x, double y, const Font& text) {
  const Rect all{0, 0, canvas.width(), canvas.height()};
  const Rgb black{0, 0, 0};
  double ly = y + 0.5 * Legend::kRowHeight;  // the middle of the row
  for (const Legend::Row& r : legend.rows) {
    if (r.ring) canvas.dot({x + 9, ly}, r.ring_radius, *r.ring, 1.0, all);
    canvas.dot({x + 9, ly}, 7, r.fill, 1.0, all);
    canvas.text(x + 24, ly + 0.5 * digitHeight(text), r.label, text, black);
    ly += Legend::kRowHeight;
  }
  canvas.text(x, ly + 0.5 * digitHeight(text), "colour: predicted class", text, black);
}

}  // namespace

void writeGraphPng(const std::filesystem::path& path, const GraphPicture& pic, int width,
                   int height) {
  const size_t n = pic.positions.size();
  if (pic.node_class.size() != n || pic.labelled.size() != n || pic.wrong.size() != n || n == 0)
    throw std::runtime_error("writeGraphPng(" + path.string() + "): " + std::to_string(n) +
                             " positions, " + std::to_string(pic.node_class.size()) + " classes, " +
                             std::to_string(pic.labelled.size()) + " labelled, " +
                             std::to_string(pic.wrong.size()) + " wrong flags");
  const Rgb white{255, 255, 255}, black{0, 0, 0}, grey{170, 170, 170}, red{214, 39, 40};
  const Font text{12.0}, heading{15.0, true}, number{11.0, true};
  const TextSize head_line = measureText("", heading);
  const bool numbered = n <= 60;
  // Numbered nodes are big enough to hold two digits of 11 px bold.
  const double radius = std::clamp(300.0 / std::sqrt(double(n)), 2.5, numbered ? 12.0 : 11.0);
  const int pad = 10, ring = 5;  // ring: how far the widest mark (the red ring) reaches out

  const Legend legend = graphLegend(pic.class_names, text, pad);
  const int legend_w = legend.width, legend_h = legend.height;

  // The drawing keeps layoutGraph's aspect, as large as fits width x height beside the legend,
  // and the picture is cut to what it draws.
  double x0 = 1e300, y0 = 1e300, x1 = -1e300, y1 = -1e300;
  for (const auto& [x, y] : pic.positions)
    x0 = std::min(x0, x), x1 = std::max(x1, x), y0 = std::min(y0, y), y1 = std::max(y1, y);
  const double xspan = std::max(x1 - x0, 1e-9), yspan = std::max(y1 - y0, 1e-9);
  const int margin = pad + int(std::ceil(radius)) + ring;  // the nodes' reach past a position
  const int top =
      pic.title.empty() ? 0 : pad + int(std::ceil(head_line.ascent + head_line.descent));
  const double room_w = std::max(width - legend_w - 2 * margin, 64);
  const double room_h = std::max(height - top - 2 * margin, 64);
  const double scale = std::min(room_w / xspan, room_h / yspan);
  const int draw_w = int(std::ceil(xspan * scale)), draw_h = int(std::ceil(yspan * scale));
  const int canvas_w = std::max(2 * margin + draw_w + legend_w,
                                2 * pad + int(std::ceil(measureText(pic.title, heading).width)));
  const int canvas_h = top + std::max(2 * margin + draw_h, pad + legend_h);
  Canvas canvas(canvas_w, canvas_h, white);
  canvas.text(pad, pad + head_line.ascent, pic.title, heading, black);
  auto at = [&](size_t i) {
    return Point{margin + (pic.positions[i].first - x0) * scale,
                 top + margin + (y1 - pic.positions[i].second) * scale};
  };
  const Rect all{0, 0, canvas_w, canvas_h};
  for (const auto& [a, b] : pic.edges) {
    if (a >= n || b >= n || a == b) continue;
    const Point ends[2] = {at(a), at(b)};
    canvas.polyline(ends, n > 500 ? 0.5 : 1.0, grey, all);
  }
  const double digits = digitHeight(number);
  for (size_t i = 0; i < n; ++i) {
    const Point p = at(i);
    const unsigned char* c = categoricalColour(pic.node_class[i]);
    const Rgb fill{c[0], c[1], c[2]};
    if (pic.wrong[i]) canvas.dot(p, radius + 4.5, red, 1.0, all);
    if (pic.labelled[i]) canvas.dot(p, radius + 2.5, black, 1.0, all);
    canvas.dot(p, radius, fill, 1.0, all);
    if (numbered)
      canvas.text(p.x, p.y + 0.5 * digits, std::to_string(i), number, textOn(fill), Align::Centre);
  }
  drawLegend(canvas, legend, 2 * margin + draw_w + pad, top + margin, text);
  writePng(path, canvas);
}

}  // namespace vkgrad::apps
