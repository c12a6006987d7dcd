#include "common/graph_figure.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "common/plot.h"
#include "common/raster.h"

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

void writeGraphPng(const std::filesystem::path& path, const GraphPicture& pic, int width,
                   int height) {
  const size_t n = pic.positions.size();
  if (pic.node_class.size() != n || pic.labelled.size() != n || pic.wrong.size() != n || n == 0)
    throw std::runtime_error("writeGraphPng(" + path.string() + "): " + std::to_string(n) +
                             " positions, " + std::to_string(pic.node_class.size()) + " classes, " +
                             std::to_string(pic.labelled.size()) + " labelled, " +
                             std::to_string(pic.wrong.size()) + " wrong flags");
  const Rgb white{255, 255, 255}, black{0, 0, 0}, grey{170, 170, 170}, red{214, 39, 40};
  Canvas canvas(width, height, white);
  const int legend_w = 170, top = 40, margin = 30;
  drawText(canvas, 10, 10, pic.title, black, 2);
  const Rect area{margin, top + margin, width - legend_w - margin, height - margin};
  const double radius = std::clamp(300.0 / std::sqrt(double(n)), 2.5, 11.0);
  auto at = [&](size_t i) {
    return std::pair<double, double>{
        area.x0 + pic.positions[i].first * (area.x1 - area.x0),
        area.y0 + (1.0 - pic.positions[i].second) * (area.y1 - area.y0)};
  };
  Coverage lines(width, height);
  for (const auto& [a, b] : pic.edges) {
    if (a >= n || b >= n || a == b) continue;
    const auto [xa, ya] = at(a);
    const auto [xb, yb] = at(b);
    lines.stroke(xa, ya, xb, yb, n > 500 ? 0.5 : 1.0);
  }
  const Rect all{0, 0, width, height};
  canvas.composite(lines, grey, all);
  for (size_t i = 0; i < n; ++i) {
    const auto [x, y] = at(i);
    const unsigned char* c = categoricalColour(pic.node_class[i]);
    if (pic.wrong[i]) canvas.dot(x, y, radius + 4.5, red, 1.0f, all);
    if (pic.labelled[i]) canvas.dot(x, y, radius + 2.5, black, 1.0f, all);
    canvas.dot(x, y, radius, {c[0], c[1], c[2]}, 1.0f, all);
    if (n <= 60) {
      const std::string id = std::to_string(i);
      drawText(canvas, int(x) - textWidth(id, 1) / 2, int(y) - kTextHeight / 2, id, white, 1);
    }
  }
  // The legend, right of the drawing.
  int ly = top + margin;
  const int lx = width - legend_w + 10;
  for (size_t c = 0; c < pic.class_names.size(); ++c, ly += 22) {
    const unsigned char* rgb = categoricalColour(int(c));
    canvas.dot(lx + 8, ly + 5, 7, {rgb[0], rgb[1], rgb[2]}, 1.0f, all);
    drawText(canvas, lx + 22, ly, pic.class_names[c], black, 1);
  }
  ly += 8;
  canvas.dot(lx + 8, ly + 5, 9.5, black, 1.0f, all);
  canvas.dot(lx + 8, ly + 5, 7, grey, 1.0f, all);
  drawText(canvas, lx + 22, ly, "labelled (trained on)", black, 1);
  ly += 24;
  canvas.dot(lx + 8, ly + 5, 11.5, red, 1.0f, all);
  canvas.dot(lx + 8, ly + 5, 7, grey, 1.0f, all);
  drawText(canvas, lx + 22, ly, "predicted wrong", black, 1);
  ly += 24;
  drawText(canvas, lx, ly, "colour: predicted class", black, 1);
  writePng(path, canvas);
}

}  // namespace vkgrad::apps
