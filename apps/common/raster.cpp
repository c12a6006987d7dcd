#include "common/raster.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include <stb_image_write.h>

#include "vkgrad/graph/atomic_file.h"

// stb_easy_font is header-only with every function static (v1.1); this is its one includer,
// and it only needs print and width.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wunused-variable"
#include <stb_easy_font.h>
#pragma GCC diagnostic pop

namespace vkgrad::apps {
namespace {

Rect intersect(Rect a, Rect b) {
  return {std::max(a.x0, b.x0), std::max(a.y0, b.y0), std::min(a.x1, b.x1), std::min(a.y1, b.y1)};
}

// stb_easy_font indexes a table by (c - 32) without checks, so the text must be printable ASCII.
std::string printable(std::string_view text) {
  std::string s(text);
  for (char& c : s)
    if (c < 32 || c > 126) c = '?';
  return s;
}

// Calls f(x0, y0, x1, y1) for each quad of the text printed at the origin, in font units.
template <class F>
void forEachQuad(std::string_view text, F&& f) {
  std::string s = printable(text);
  // Each quad is 4 vertices of 16 bytes; a glyph has at most a dozen segments.
  std::vector<char> buffer(s.size() * 16 * 64 + 64);
  const int quads = stb_easy_font_print(0, 0, s.data(), nullptr, buffer.data(), int(buffer.size()));
  for (int q = 0; q < quads; ++q) {
    float v0[2], v2[2];  // vertices 0 and 2 are opposite corners
    std::copy_n(reinterpret_cast<const float*>(buffer.data() + q * 64), 2, v0);
    std::copy_n(reinterpret_cast<const float*>(buffer.data() + q * 64 + 32), 2, v2);
    f(int(v0[0]), int(v0[1]), int(v2[0]), int(v2[1]));
  }
}

// The covered fraction of a pixel whose centre is d from the centre line of a band of half
// width `half` (exact for a straight edge, close enough for a disc).
float edgeCoverage(double half, double d) {
  return float(std::clamp(half + 0.5 - d, 0.0, 1.0));
}

}  // namespace

Coverage::Coverage(int width, int height)
    : width_(width), height_(height), cov_(size_t(width) * size_t(height), 0.0f) {}

void Coverage::stroke(double x0, double y0, double x1, double y1, double width) {
  const double half = 0.5 * width;
  const double reach = half + 1.0;
  const int px0 = std::max(0, int(std::floor(std::min(x0, x1) - reach)));
  const int px1 = std::min(width_, int(std::ceil(std::max(x0, x1) + reach)));
  const int py0 = std::max(0, int(std::floor(std::min(y0, y1) - reach)));
  const int py1 = std::min(height_, int(std::ceil(std::max(y0, y1) + reach)));
  const double dx = x1 - x0, dy = y1 - y0, len2 = dx * dx + dy * dy;
  for (int py = py0; py < py1; ++py) {
    for (int px = px0; px < px1; ++px) {
      const double cx = px + 0.5 - x0, cy = py + 0.5 - y0;
      const double t = len2 > 0 ? std::clamp((cx * dx + cy * dy) / len2, 0.0, 1.0) : 0.0;
      const double d = std::hypot(cx - t * dx, cy - t * dy);
      const float c = edgeCoverage(half, d);
      float& slot = cov_[size_t(py) * size_t(width_) + size_t(px)];
      slot = std::max(slot, c);
    }
  }
}

void Coverage::square(double cx, double cy, double half) {
  const int px0 = std::max(0, int(std::floor(cx - half)));
  const int px1 = std::min(width_, int(std::ceil(cx + half)));
  const int py0 = std::max(0, int(std::floor(cy - half)));
  const int py1 = std::min(height_, int(std::ceil(cy + half)));
  auto overlap = [](double a0, double a1, int p) {
    return std::max(0.0, std::min(a1, p + 1.0) - std::max(a0, double(p)));
  };
  for (int py = py0; py < py1; ++py) {
    const double oy = overlap(cy - half, cy + half, py);
    for (int px = px0; px < px1; ++px) {
      float& slot = cov_[size_t(py) * size_t(width_) + size_t(px)];
      slot = std::max(slot, float(oy * overlap(cx - half, cx + half, px)));
    }
  }
}

double Coverage::density(Rect r) const {
  r = intersect(r, {0, 0, width_, height_});
  if (r.x1 <= r.x0 || r.y1 <= r.y0) return 0.0;
  size_t hit = 0;
  for (int y = r.y0; y < r.y1; ++y)
    for (int x = r.x0; x < r.x1; ++x) hit += at(x, y) > 0.0f;
  return double(hit) / (double(r.x1 - r.x0) * double(r.y1 - r.y0));
}

Canvas::Canvas(int width, int height, Rgb background)
    : width_(width), height_(height), px_(size_t(width) * size_t(height) * 3) {
  fill({0, 0, width, height}, background);
}

void Canvas::fill(Rect r, Rgb c) {
  r = intersect(r, {0, 0, width_, height_});
  for (int y = r.y0; y < r.y1; ++y) {
    for (int x = r.x0; x < r.x1; ++x) {
      unsigned char* p = &px_[(size_t(y) * size_t(width_) + size_t(x)) * 3];
      p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }
  }
}

void Canvas::blend(int x, int y, Rgb c, float alpha) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_ || alpha <= 0.0f) return;
  unsigned char* p = &px_[(size_t(y) * size_t(width_) + size_t(x)) * 3];
  const unsigned char src[3] = {c.r, c.g, c.b};
  for (int i = 0; i < 3; ++i)
    p[i] = static_cast<unsigned char>(std::lround(p[i] + (src[i] - p[i]) * std::min(alpha, 1.0f)));
}

void Canvas::composite(const Coverage& mask, Rgb c, Rect clip) {
  clip = intersect(clip, {0, 0, width_, height_});
  for (int y = clip.y0; y < clip.y1; ++y)
    for (int x = clip.x0; x < clip.x1; ++x) blend(x, y, c, mask.at(x, y));
}

void Canvas::dot(double cx, double cy, double radius, Rgb c, float alpha, Rect clip) {
  clip = intersect(clip, {0, 0, width_, height_});
  const int x0 = std::max(clip.x0, int(std::floor(cx - radius - 1.0)));
  const int x1 = std::min(clip.x1, int(std::ceil(cx + radius + 1.0)));
  const int y0 = std::max(clip.y0, int(std::floor(cy - radius - 1.0)));
  const int y1 = std::min(clip.y1, int(std::ceil(cy + radius + 1.0)));
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x)
      blend(x, y, c, alpha * edgeCoverage(radius, std::hypot(x + 0.5 - cx, y + 0.5 - cy)));
}

int textWidth(std::string_view text, int scale) {
  std::string s = printable(text);
  // stb counts the one-unit gap after the last glyph; drop it so centred text is centred.
  return std::max(0, stb_easy_font_width(s.data()) - 1) * scale;
}

void drawText(Canvas& canvas, int x, int y, std::string_view text, Rgb c, int scale) {
  forEachQuad(text, [&](int qx0, int qy0, int qx1, int qy1) {
    canvas.fill({x + qx0 * scale, y + qy0 * scale, x + qx1 * scale, y + qy1 * scale}, c);
  });
}

void drawTextUp(Canvas& canvas, int x, int y, std::string_view text, Rgb c, int scale) {
  forEachQuad(text, [&](int qx0, int qy0, int qx1, int qy1) {
    canvas.fill({x + qy0 * scale, y - qx1 * scale, x + qy1 * scale, y - qx0 * scale}, c);
  });
}

void writePng(const std::filesystem::path& path, const Canvas& canvas) {
  std::vector<unsigned char> png;
  auto append = [](void* context, void* data, int size) {
    auto* out = static_cast<std::vector<unsigned char>*>(context);
    out->insert(out->end(), static_cast<unsigned char*>(data),
                static_cast<unsigned char*>(data) + size);
  };
  if (!stbi_write_png_to_func(append, &png, canvas.width(), canvas.height(), 3, canvas.data(),
                              canvas.width() * 3))
    throw std::runtime_error(path.string() + ": PNG encoding failed");
  graph::writeFileAtomically(
      path, std::string_view(reinterpret_cast<const char*>(png.data()), png.size()));
}

}  // namespace vkgrad::apps
