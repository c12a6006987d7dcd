// The cairo canvas under the apps' pictures: text lands where its anchor says at the size its
// font says, anti-aliased; grey images scale by nearest neighbour, unsmoothed; bad UTF-8 does
// not stop the drawing; pixels survive the PNG round trip in their channel order.
#include "common/canvas.h"

#include <gtest/gtest.h>
#include <stb_image.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/random.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using apps::Align;
using apps::Canvas;
using apps::Font;
using apps::Rgb;

constexpr Rgb kWhite{255, 255, 255}, kBlack{0, 0, 0};

// The box (inclusive) of the pixels darker than white, and how many are neither white nor
// black (anti-aliased edges).
struct Ink {
  int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1, greys = 0;
};

Ink inkOf(const Canvas& canvas) {
  const std::vector<Rgb> px = canvas.pixels();
  Ink ink;
  for (int y = 0; y < canvas.height(); ++y)
    for (int x = 0; x < canvas.width(); ++x) {
      const Rgb c = px[size_t(y) * size_t(canvas.width()) + size_t(x)];
      if (c.r == 255 && c.g == 255 && c.b == 255) continue;
      ink.x0 = std::min(ink.x0, x), ink.y0 = std::min(ink.y0, y);
      ink.x1 = std::max(ink.x1, x), ink.y1 = std::max(ink.y1, y);
      ink.greys += c.r > 30 && c.r < 225;
    }
  return ink;
}

TEST(Canvas, TextSitsOnItsAnchorAtItsFontsSize) {
  for (const double px : {12.0, 24.0}) {
    Canvas canvas(300, 80, kWhite);
    const Font font{px};
    // 'H' stands a cap height above the baseline, 'g' hangs below it.
    canvas.text(150, 50, "Hxg", font, kBlack, Align::Centre);
    const Ink ink = inkOf(canvas);
    ASSERT_GE(ink.x1, 0) << "no text drawn at " << px << " px";
    EXPECT_NEAR(0.5 * (ink.x0 + ink.x1 + 1), 150.0, 0.1 * px) << px;
    // The ink is the advance less the side bearings of 'H' and 'g' (about 0.1 em each).
    const double advance = apps::measureText("Hxg", font).width;
    EXPECT_LE(ink.x1 + 1 - ink.x0, advance + 1) << px;
    EXPECT_GE(ink.x1 + 1 - ink.x0, advance - 0.3 * px) << px;
    // DejaVu Sans: capitals 0.73 em tall, descenders 0.24 em deep (fontconfig's substitute for
    // a missing DejaVu is close).
    EXPECT_NEAR(50 - ink.y0, 0.73 * px, 0.12 * px + 1) << px;
    EXPECT_NEAR(ink.y1 + 1 - 50, 0.24 * px, 0.12 * px + 1) << px;
    EXPECT_GT(ink.greys, 6) << "text at " << px << " px is not anti-aliased";
  }
}

TEST(Canvas, TextUpReadsUpwardsCentredOnItsAnchor) {
  Canvas canvas(60, 300, kWhite);
  const Font font{13.0};
  canvas.textUp(30, 150, "loss (nats)", font, kBlack, Align::Centre);
  const Ink ink = inkOf(canvas);
  ASSERT_GE(ink.x1, 0);
  const double length = apps::measureText("loss (nats)", font).width;
  EXPECT_NEAR(ink.y1 + 1 - ink.y0, length, 3.0);
  EXPECT_NEAR(0.5 * (ink.y0 + ink.y1 + 1), 150.0, 2.0);
  EXPECT_LT(ink.x1 - ink.x0, 16);  // one line of 13 px text across
  EXPECT_LE(ink.x1, 30 + 4);       // the glyphs stand left of the baseline; '(' dips past it
}

TEST(Canvas, GreyImagesScaleUpUnsmoothed) {
  Rng rng;
  const int rows = 5 + int(rng.below(4)), cols = 3 + int(rng.below(6)),
            zoom = 2 + int(rng.below(4));
  std::vector<uint8_t> grey(size_t(rows) * size_t(cols));
  for (uint8_t& v : grey) v = uint8_t(rng.below(256));
  const int x0 = 3, y0 = 7;
  Canvas canvas(x0 + cols * zoom + 5, y0 + rows * zoom + 4, Rgb{10, 200, 30});
  canvas.greyImage(x0, y0, grey, rows, cols, zoom);
  const std::vector<Rgb> px = canvas.pixels();
  for (int y = 0; y < canvas.height(); ++y) {
    for (int x = 0; x < canvas.width(); ++x) {
      const Rgb c = px[size_t(y) * size_t(canvas.width()) + size_t(x)];
      const bool inside = x >= x0 && y >= y0 && x < x0 + cols * zoom && y < y0 + rows * zoom;
      const Rgb want = inside ? Rgb{grey[size_t((y - y0) / zoom * cols + (x - x0) / zoom)],
                                    grey[size_t((y - y0) / zoom * cols + (x - x0) / zoom)],
                                    grey[size_t((y - y0) / zoom * cols + (x - x0) / zoom)]}
                              : Rgb{10, 200, 30};
      ASSERT_TRUE(c.r == want.r && c.g == want.g && c.b == want.b)
          << "pixel (" << x << ", " << y << ") " << rng.describe();
    }
  }
}

TEST(Canvas, BadUtf8IsDrawnAndLaterDrawingGoesOn) {
  Canvas canvas(200, 60, kWhite);
  // cairo puts a context in an error state for good on invalid UTF-8; the canvas must not.
  canvas.text(10, 30, "caf\xc3 \xff\xfe end", Font{12.0}, kBlack);
  canvas.fill({150, 40, 160, 50}, Rgb{200, 30, 30});
  const Ink ink = inkOf(canvas);
  EXPECT_LT(ink.x0, 20);  // the text is there
  const std::vector<Rgb> px = canvas.pixels();
  const Rgb c = px[45 * 200 + 155];
  EXPECT_TRUE(c.r == 200 && c.g == 30 && c.b == 30) << "drawing stopped after the bad text";
}

TEST(Canvas, PixelsSurviveThePngRoundTrip) {
  Rng rng;
  const int w = 17 + int(rng.below(40)), h = 9 + int(rng.below(30));
  std::vector<Rgb> rgb(size_t(w) * size_t(h));
  for (Rgb& c : rgb)
    c = {uint8_t(rng.below(256)), uint8_t(rng.below(256)), uint8_t(rng.below(256))};
  Canvas canvas(w, h, kWhite);
  canvas.setPixels(rgb);
  const fs::path path =
      fs::temp_directory_path() / ("vkgrad_test_canvas_" + std::to_string(rng.seed()) + ".png");
  apps::writePng(path, canvas);
  int rw = 0, rh = 0, channels = 0;
  unsigned char* data = stbi_load(path.string().c_str(), &rw, &rh, &channels, 3);
  fs::remove(path);
  ASSERT_NE(data, nullptr);
  ASSERT_EQ(rw, w);
  ASSERT_EQ(rh, h);
  const bool same =
      std::equal(rgb.begin(), rgb.end(), reinterpret_cast<const Rgb*>(data),
                 [](const Rgb& a, const Rgb& b) { return a.r == b.r && a.g == b.g && a.b == b.b; });
  stbi_image_free(data);
  EXPECT_TRUE(same) << rng.describe();
}

}  // namespace
}  // namespace vkgrad::test
