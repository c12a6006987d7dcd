#include "common/canvas.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <string>
#include <utility>

#include "vkgrad/io/atomic_file.h"

namespace vkgrad::apps {
namespace {

constexpr const char* kFace = "DejaVu Sans";

// cairo stops drawing on a context after it is handed invalid UTF-8, so every byte that does
// not belong to a well-formed sequence becomes '?'.
std::string validUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    const size_t n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    bool ok = n > 0 && i + n <= s.size() && !(n == 2 && b < 0xc2);
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) >> 6) == 2;
    if (ok && b >= 0x20 && b != 0x7f) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += '?';  // a control character, or one byte of a broken sequence
      i += 1;
    }
  }
  return out;
}

// Grey anti-aliasing (no colour fringes in a PNG viewed anywhere) and slight hinting: glyph
// heights snap to the pixel grid, which keeps 11-12 px text sharp, and advances are whole
// pixels, so measured widths are the drawn widths.
void setFont(cairo_t* cr, Font font) {
  cairo_font_options_t* options = cairo_font_options_create();
  cairo_font_options_set_antialias(options, CAIRO_ANTIALIAS_GRAY);
  cairo_font_options_set_hint_style(options, CAIRO_HINT_STYLE_SLIGHT);
  cairo_font_options_set_hint_metrics(options, CAIRO_HINT_METRICS_ON);
  cairo_set_font_options(cr, options);
  cairo_font_options_destroy(options);
  cairo_select_font_face(cr, kFace, CAIRO_FONT_SLANT_NORMAL,
                         font.bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, font.px);
}

// A context on a 1x1 surface, for measuring text before there is a canvas to draw it on.
class Scratch {
 public:
  Scratch()
      : surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1)),
        cr_(cairo_create(surface_)) {}
  ~Scratch() {
    cairo_destroy(cr_);
    cairo_surface_destroy(surface_);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  cairo_t* get() const { return cr_; }

 private:
  cairo_surface_t* surface_;
  cairo_t* cr_;
};

void setColour(cairo_t* cr, Rgb c, double alpha = 1.0) {
  cairo_set_source_rgba(cr, c.r / 255.0, c.g / 255.0, c.b / 255.0, alpha);
}

double alignOffset(cairo_t* cr, const std::string& text, Align align) {
  if (align == Align::Left) return 0.0;
  cairo_text_extents_t e;
  cairo_text_extents(cr, text.c_str(), &e);
  return align == Align::Centre ? 0.5 * e.x_advance : e.x_advance;
}

}  // namespace

TextSize measureText(std::string_view text, Font font) {
  const Scratch scratch;
  setFont(scratch.get(), font);
  cairo_text_extents_t t;
  cairo_text_extents(scratch.get(), validUtf8(text).c_str(), &t);
  cairo_font_extents_t f;
  cairo_font_extents(scratch.get(), &f);
  return {t.x_advance, f.ascent, f.descent};
}

double digitHeight(Font font) {
  const Scratch scratch;
  setFont(scratch.get(), font);
  cairo_text_extents_t t;
  cairo_text_extents(scratch.get(), "0", &t);
  return -t.y_bearing;
}

Canvas::Canvas(int width, int height, Rgb background)
    : width_(width),
      height_(height),
      surface_(cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height)),
      cr_(cairo_create(surface_)) {
  if (cairo_status(cr_) != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error("cairo: cannot make a " + std::to_string(width) + "x" +
                             std::to_string(height) + " image (" +
                             cairo_status_to_string(cairo_status(cr_)) + ")");
  fill({0, 0, width, height}, background);
}

Canvas::~Canvas() {
  if (cr_) cairo_destroy(cr_);
  if (surface_) cairo_surface_destroy(surface_);
}

Canvas::Canvas(Canvas&& other) noexcept
    : width_(other.width_),
      height_(other.height_),
      surface_(std::exchange(other.surface_, nullptr)),
      cr_(std::exchange(other.cr_, nullptr)) {}

Canvas& Canvas::operator=(Canvas&& other) noexcept {
  std::swap(width_, other.width_);
  std::swap(height_, other.height_);
  std::swap(surface_, other.surface_);
  std::swap(cr_, other.cr_);
  return *this;
}

void Canvas::clipTo(Rect r) {
  cairo_reset_clip(cr_);
  cairo_rectangle(cr_, r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0);
  cairo_clip(cr_);
}

void Canvas::fill(Rect r, Rgb c) {
  if (r.x1 <= r.x0 || r.y1 <= r.y0) return;
  cairo_reset_clip(cr_);
  setColour(cr_, c);
  cairo_rectangle(cr_, r.x0, r.y0, r.x1 - r.x0, r.y1 - r.y0);
  cairo_fill(cr_);
}

void Canvas::polyline(std::span<const Point> points, double width, Rgb c, Rect clip) {
  if (points.empty()) return;
  clipTo(clip);
  setColour(cr_, c);
  cairo_set_line_width(cr_, width);
  cairo_set_line_cap(cr_, CAIRO_LINE_CAP_ROUND);
  cairo_set_line_join(cr_, CAIRO_LINE_JOIN_ROUND);
  cairo_move_to(cr_, points[0].x, points[0].y);
  for (const Point& p : points.subspan(1)) cairo_line_to(cr_, p.x, p.y);
  if (points.size() == 1) cairo_line_to(cr_, points[0].x, points[0].y);  // a round dot
  cairo_stroke(cr_);
  cairo_reset_clip(cr_);
}

void Canvas::dot(Point centre, double radius, Rgb c, double alpha, Rect clip) {
  clipTo(clip);
  setColour(cr_, c, alpha);
  cairo_new_path(cr_);
  cairo_arc(cr_, centre.x, centre.y, radius, 0.0, 2.0 * std::numbers::pi);
  cairo_fill(cr_);
  cairo_reset_clip(cr_);
}

void Canvas::square(Point centre, double half, Rgb c, Rect clip) {
  clipTo(clip);
  setColour(cr_, c);
  cairo_rectangle(cr_, centre.x - half, centre.y - half, 2 * half, 2 * half);
  cairo_fill(cr_);
  cairo_reset_clip(cr_);
}

void Canvas::greyImage(int x, int y, std::span<const uint8_t> grey, int rows, int cols, int zoom) {
  if (grey.size() != size_t(rows) * size_t(cols) || rows <= 0 || cols <= 0)
    throw std::runtime_error("Canvas::greyImage: " + std::to_string(grey.size()) + " pixels for " +
                             std::to_string(rows) + "x" + std::to_string(cols));
  cairo_surface_t* image = cairo_image_surface_create(CAIRO_FORMAT_RGB24, cols, rows);
  unsigned char* data = cairo_image_surface_get_data(image);
  const int stride = cairo_image_surface_get_stride(image);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) {
      const uint32_t v = grey[size_t(r) * size_t(cols) + size_t(c)];
      reinterpret_cast<uint32_t*>(data + size_t(r) * size_t(stride))[c] = v << 16 | v << 8 | v;
    }
  cairo_surface_mark_dirty(image);
  cairo_reset_clip(cr_);
  cairo_save(cr_);
  cairo_translate(cr_, x, y);
  cairo_scale(cr_, zoom, zoom);
  cairo_set_source_surface(cr_, image, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr_), CAIRO_FILTER_NEAREST);  // crisp, unsmoothed
  cairo_rectangle(cr_, 0, 0, cols, rows);
  cairo_fill(cr_);
  cairo_restore(cr_);
  cairo_surface_destroy(image);
}

void Canvas::text(double x, double y, std::string_view text, Font font, Rgb c, Align align) {
  const std::string s = validUtf8(text);
  cairo_reset_clip(cr_);
  setFont(cr_, font);
  setColour(cr_, c);
  cairo_move_to(cr_, x - alignOffset(cr_, s, align), y);
  cairo_show_text(cr_, s.c_str());
  cairo_new_path(cr_);
}

void Canvas::textUp(double x, double y, std::string_view text, Font font, Rgb c, Align align) {
  const std::string s = validUtf8(text);
  cairo_reset_clip(cr_);
  setFont(cr_, font);
  setColour(cr_, c);
  cairo_save(cr_);
  cairo_translate(cr_, x, y);
  cairo_rotate(cr_, -0.5 * std::numbers::pi);
  cairo_move_to(cr_, -alignOffset(cr_, s, align), 0.0);
  cairo_show_text(cr_, s.c_str());
  cairo_new_path(cr_);
  cairo_restore(cr_);
}

std::vector<Rgb> Canvas::pixels() const {
  cairo_surface_flush(surface_);
  const unsigned char* data = cairo_image_surface_get_data(surface_);
  const int stride = cairo_image_surface_get_stride(surface_);
  std::vector<Rgb> out;
  out.reserve(size_t(width_) * size_t(height_));
  for (int y = 0; y < height_; ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(data + size_t(y) * size_t(stride));
    for (int x = 0; x < width_; ++x)  // RGB24: 0x00RRGGBB in native byte order
      out.push_back({static_cast<unsigned char>(row[x] >> 16),
                     static_cast<unsigned char>(row[x] >> 8), static_cast<unsigned char>(row[x])});
  }
  return out;
}

void Canvas::setPixels(std::span<const Rgb> rgb) {
  if (rgb.size() != size_t(width_) * size_t(height_))
    throw std::runtime_error("Canvas::setPixels: " + std::to_string(rgb.size()) + " pixels for " +
                             std::to_string(width_) + "x" + std::to_string(height_));
  cairo_surface_flush(surface_);
  unsigned char* data = cairo_image_surface_get_data(surface_);
  const int stride = cairo_image_surface_get_stride(surface_);
  for (int y = 0; y < height_; ++y) {
    auto* row = reinterpret_cast<uint32_t*>(data + size_t(y) * size_t(stride));
    for (int x = 0; x < width_; ++x) {
      const Rgb c = rgb[size_t(y) * size_t(width_) + size_t(x)];
      row[x] = uint32_t(c.r) << 16 | uint32_t(c.g) << 8 | c.b;
    }
  }
  cairo_surface_mark_dirty(surface_);
}

void writePng(const std::filesystem::path& path, const Canvas& canvas) {
  std::string png;
  auto append = [](void* closure, const unsigned char* data, unsigned int length) {
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
  };
  const cairo_status_t status = cairo_surface_write_to_png_stream(canvas.surface_, append, &png);
  if (status != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error(path.string() + ": PNG encoding failed (" +
                             cairo_status_to_string(status) + ")");
  graph::writeFileAtomically(path, png);
}

}  // namespace vkgrad::apps
