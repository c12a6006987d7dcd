// A small RGB8 canvas with what the plots need: filled rectangles, anti-aliased strokes and
// squares through a coverage mask, and stb_easy_font text (upright or rotated for a y label).
// Continuous coordinates: pixel (i, j) covers [i, i+1) x [j, j+1); y grows downwards.
#pragma once

#include <filesystem>
#include <string_view>
#include <vector>

namespace vkgrad::apps {

struct Rgb {
  unsigned char r, g, b;
};

struct Rect {  // half-open pixel range [x0, x1) x [y0, y1)
  int x0, y0, x1, y1;
};

// Per-pixel coverage in [0, 1]. Shapes combine by max, so the overlapping ends of one
// polyline's segments do not darken its joins the way blending each segment would.
class Coverage {
 public:
  Coverage(int width, int height);
  // A capsule of the given width around the segment; a zero-length one is a dot.
  void stroke(double x0, double y0, double x1, double y1, double width);
  void square(double cx, double cy, double half);  // exact area coverage of an axis-aligned square
  float at(int x, int y) const { return cov_[size_t(y) * size_t(width_) + size_t(x)]; }
  // Fraction of `r` with any coverage; the legend goes where this is smallest.
  double density(Rect r) const;

 private:
  int width_, height_;
  std::vector<float> cov_;
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);
  int width() const { return width_; }
  int height() const { return height_; }
  const unsigned char* data() const { return px_.data(); }  // RGB8 rows, top row first

  void fill(Rect r, Rgb c);  // clipped to the canvas
  void blend(int x, int y, Rgb c, float alpha);
  void composite(const Coverage& mask, Rgb c, Rect clip);  // paints c where mask > 0, inside clip
  // An anti-aliased disc blended at opacity alpha over what is there, inside clip: unlike a
  // Coverage mask, overlapping dots build up, so dense regions of a scatter plot read stronger.
  void dot(double cx, double cy, double radius, Rgb c, float alpha, Rect clip);

 private:
  int width_, height_;
  std::vector<unsigned char> px_;
};

// Writes the canvas as a PNG (stb) through a temporary file beside `path` renamed over it, so
// readers (and a crash mid-write) see the old picture or the whole new one. Throws
// std::runtime_error naming the path when it cannot be written.
void writePng(const std::filesystem::path& path, const Canvas& canvas);

// stb_easy_font text at an integer scale. Glyphs are kTextHeight units tall above the baseline
// (descenders reach 2 more); only printable ASCII is drawn, anything else becomes '?'.
inline constexpr int kTextHeight = 7;
int textWidth(std::string_view text, int scale);
void drawText(Canvas& canvas, int x, int y, std::string_view text, Rgb c,
              int scale);  // (x, y): top left
// Rotated a quarter turn anticlockwise, reading upwards; (x, y) is the left edge of the glyphs'
// top and the bottom of the text run.
void drawTextUp(Canvas& canvas, int x, int y, std::string_view text, Rgb c, int scale);

}  // namespace vkgrad::apps
