// The apps' pictures are drawn on a cairo image (RGB, 8 bits a channel): pixel-aligned
// rectangles, anti-aliased lines, dots and squares, nearest-neighbour image tiles, and text in
// DejaVu Sans (Debian's fonts-dejavu-core; fontconfig substitutes its nearest sans face where
// that is missing). Continuous coordinates: pixel (i, j) covers [i, i+1) x [j, j+1); y grows
// downwards.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <string_view>
#include <vector>

struct _cairo;
struct _cairo_surface;

namespace vkgrad::apps {

struct Rgb {
  unsigned char r, g, b;
};

struct Rect {  // half-open pixel range [x0, x1) x [y0, y1)
  int x0, y0, x1, y1;
};

struct Point {
  double x, y;
};

struct Font {
  double px = 12.0;  // the em size in pixels; a digit is about 0.73 em tall
  bool bold = false;
};

// A run of text's advance width and the font's ascent and descent around its baseline (the
// font's, not the glyphs': every run of one font has the same line height), in pixels.
struct TextSize {
  double width = 0, ascent = 0, descent = 0;
};
// Text is UTF-8; bytes that are not are drawn as '?'.
TextSize measureText(std::string_view text, Font font);
double digitHeight(Font font);  // how tall '0' stands above the baseline

enum class Align { Left, Centre, Right };  // where the anchor is along the baseline

class Canvas {
 public:
  Canvas(int width, int height, Rgb background);
  ~Canvas();
  Canvas(Canvas&& other) noexcept;
  Canvas& operator=(Canvas&& other) noexcept;
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  int width() const { return width_; }
  int height() const { return height_; }

  void fill(Rect r, Rgb c);  // exact pixels, clipped to the canvas
  // One stroke through the points, round joins and caps, clipped to `clip`: a polyline's
  // segments do not darken each other where they meet.
  void polyline(std::span<const Point> points, double width, Rgb c, Rect clip);
  // A disc blended at opacity alpha over what is there, so overlapping dots build up.
  void dot(Point centre, double radius, Rgb c, double alpha, Rect clip);
  void square(Point centre, double half, Rgb c, Rect clip);  // axis-aligned, opaque
  // grey: rows x cols bytes, row-major; each becomes a zoom x zoom block at (x, y) onwards, so
  // small images stay crisp.
  void greyImage(int x, int y, std::span<const uint8_t> grey, int rows, int cols, int zoom);
  // (x, y): the anchor on the baseline.
  void text(double x, double y, std::string_view text, Font font, Rgb c, Align align = Align::Left);
  // Rotated a quarter turn anticlockwise, reading upwards; (x, y): the anchor on the baseline.
  void textUp(double x, double y, std::string_view text, Font font, Rgb c,
              Align align = Align::Centre);

  std::vector<Rgb> pixels() const;           // rows, top first
  void setPixels(std::span<const Rgb> rgb);  // width * height of them, rows top first

  friend void writePng(const std::filesystem::path& path, const Canvas& canvas);

 private:
  void clipTo(Rect r);

  int width_ = 0, height_ = 0;
  _cairo_surface* surface_ = nullptr;
  _cairo* cr_ = nullptr;
};

// Writes the canvas as a PNG through a temporary file beside `path` renamed over it, so
// readers (and a crash mid-write) see the old picture or the whole new one. Throws
// std::runtime_error naming the path when it cannot be written.
void writePng(const std::filesystem::path& path, const Canvas& canvas);

}  // namespace vkgrad::apps
