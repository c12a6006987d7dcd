// writeLinePlot draws each point where its axes say, skips what cannot be drawn, and writes a
// whole PNG or nothing. The PNGs are read back with stb_image.
#include "common/plot.h"

#include <gtest/gtest.h>
#include <stb_image.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "common/random.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using apps::PlotOptions;
using apps::Series;

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;

  bool is(int x, int y, const unsigned char c[3]) const {
    const unsigned char* p = &rgb[(size_t(y) * size_t(width) + size_t(x)) * 3];
    return p[0] == c[0] && p[1] == c[1] && p[2] == c[2];
  }
  int count(const unsigned char c[3]) const {
    int n = 0;
    for (int y = 0; y < height; ++y)
      for (int x = 0; x < width; ++x) n += is(x, y, c);
    return n;
  }
};

Image load(const fs::path& path) {
  Image image;
  int channels = 0;
  unsigned char* data = stbi_load(path.string().c_str(), &image.width, &image.height, &channels, 3);
  if (!data) throw std::runtime_error("stbi_load failed on " + path.string());
  image.rgb.assign(data, data + size_t(image.width) * size_t(image.height) * 3);
  stbi_image_free(data);
  return image;
}

// A fresh directory under the system temp dir, removed with everything in it.
struct TempDir {
  fs::path path;
  explicit TempDir(const Rng& rng) {
    path = fs::temp_directory_path() / ("vkgrad_test_plot_" + std::to_string(rng.seed()) + "_" +
                                        std::to_string(reinterpret_cast<uintptr_t>(this)));
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path, ignored);
  }
};

// A horizontal line of colour c: the mean row of the rows where c's longest run is at least
// half the longest anywhere (an anti-aliased 2 px line fully covers one or two rows), and the
// ends of that longest run. Legend swatches are short, so they do not win.
struct HorizontalLine {
  double row = -1;
  int left = -1, right = -1;
};

HorizontalLine findHorizontal(const Image& im, const unsigned char c[3]) {
  std::vector<int> best_len(size_t(im.height), 0), best_end(size_t(im.height), -1);
  for (int y = 0; y < im.height; ++y) {
    for (int x = 0, run = 0; x < im.width; ++x) {
      run = im.is(x, y, c) ? run + 1 : 0;
      if (run > best_len[size_t(y)]) best_len[size_t(y)] = run, best_end[size_t(y)] = x;
    }
  }
  int top = 0;
  for (int y = 0; y < im.height; ++y)
    if (best_len[size_t(y)] > best_len[size_t(top)]) top = y;
  HorizontalLine line;
  double rows = 0, n = 0;
  for (int y = 0; y < im.height; ++y)
    if (2 * best_len[size_t(y)] >= best_len[size_t(top)]) rows += y, n += 1;
  line.row = rows / n;
  line.right = best_end[size_t(top)];
  line.left = line.right - best_len[size_t(top)] + 1;
  return line;
}

Series horizontal(const std::string& label, double y, double x_end, int points, unsigned char r,
                  unsigned char g, unsigned char b) {
  Series s{label, {}, {}, {r, g, b}};
  for (int i = 0; i < points; ++i) {
    s.x.push_back(x_end * i / (points - 1));
    s.y.push_back(y);
  }
  return s;
}

TEST(Plot, LinearAxesPlaceLinesWhereTheMappingSays) {
  Rng rng;
  TempDir dir(rng);
  const double base = rng.uniform(1, -50.0f, 50.0f)[0], span = rng.uniform(1, 0.5f, 20.0f)[0];
  const int n = 61 + int(rng.below(80));  // points per line
  const double x_max = n - 1;
  Series low = horizontal("low", base, x_max, n, 31, 119, 180);
  Series high = horizontal("high", base + span, x_max * 2 / 3, n, 255, 127, 14);
  Series mid = horizontal("quarter", base + 0.25 * span, x_max, n, 44, 160, 44);
  mid.y[size_t(n / 2)] = NAN;  // a gap in the line, not an error
  mid.markers = true;
  PlotOptions options{"test", "step", "value"};
  options.width = 811, options.height = 503;
  const fs::path path = dir.path / "loss.png";
  ASSERT_NO_THROW(apps::writeLinePlot(path, {low, high, mid}, options)) << rng.describe();

  const Image im = load(path);
  ASSERT_EQ(im.width, 811);
  ASSERT_EQ(im.height, 503);
  for (const Series* s : {&low, &high, &mid}) EXPECT_GT(im.count(s->rgb), 200) << s->label;

  const HorizontalLine l = findHorizontal(im, low.rgb), h = findHorizontal(im, high.rgb),
                       m = findHorizontal(im, mid.rgb);
  // Inside the frame: margins all round, and y grows upwards.
  EXPECT_GT(l.left, 10);
  EXPECT_LT(l.right, im.width - 10);
  EXPECT_GT(l.right - l.left, im.width / 2);
  EXPECT_GT(h.row, 10);
  EXPECT_LT(l.row, im.height - 10);
  EXPECT_LT(h.row, m.row);
  EXPECT_LT(m.row, l.row);
  // y = base + span/4 sits a quarter of the way up; the high line ends at x = 2/3 x_max (±2 px).
  EXPECT_NEAR(m.row, l.row + 0.25 * (h.row - l.row), 2.0) << rng.describe();
  EXPECT_NEAR(h.left, l.left, 2.0);
  EXPECT_NEAR(h.right, l.left + (l.right - l.left) * 2.0 / 3.0, 2.0) << rng.describe();
  // The NaN leaves the middle line broken at its x.
  const int gap_x = int(std::lround(l.left + (l.right - l.left) * (n / 2) / x_max));
  for (int dy = -1; dy <= 1; ++dy)
    EXPECT_FALSE(im.is(gap_x, int(std::lround(m.row)) + dy, mid.rgb));
}

TEST(Plot, LogAxisSpacesDecadesEvenly) {
  Rng rng;
  TempDir dir(rng);
  const double unit = std::pow(10.0, rng.uniform(1, -3.0f, 3.0f)[0]);
  const int n = 37 + int(rng.below(50));
  Series one = horizontal("1", unit, n, n, 31, 119, 180);
  Series ten = horizontal("10", 10 * unit, n, n, 214, 39, 40);
  Series thousand = horizontal("1000", 1000 * unit, n, n, 148, 103, 189);
  ten.y[3] = 0.0;  // not drawable on a log axis: skipped like a NaN
  ten.y[4] = -1.0;
  PlotOptions options{"log", "step", "loss"};
  options.log_y = true;
  options.width = 645, options.height = 433;
  const fs::path path = dir.path / "log.png";
  ASSERT_NO_THROW(apps::writeLinePlot(path, {one, ten, thousand}, options)) << rng.describe();

  const Image im = load(path);
  ASSERT_EQ(im.width, 645);
  ASSERT_EQ(im.height, 433);
  const HorizontalLine a = findHorizontal(im, one.rgb), b = findHorizontal(im, ten.rgb),
                       c = findHorizontal(im, thousand.rgb);
  EXPECT_GT(a.row - c.row, im.height / 2);
  EXPECT_NEAR(b.row, a.row + (c.row - a.row) / 3.0, 2.0) << rng.describe();
}

TEST(Plot, DegenerateRangesStillDraw) {
  Rng rng;
  TempDir dir(rng);
  const double v = rng.uniform(1, -5.0f, 5.0f)[0];
  const fs::path one = dir.path / "one.png", flat = dir.path / "flat.png";
  Series point{"point", {v}, {v}};
  ASSERT_NO_THROW(apps::writeLinePlot(one, {point}, {}));
  EXPECT_GT(load(one).count(point.rgb), 4);  // a lone point is a dot, not nothing

  for (bool log_y : {false, true}) {
    Series line = horizontal("flat", 3.0, 1.0, 2, 31, 119, 180);
    PlotOptions options;
    options.log_y = log_y;
    ASSERT_NO_THROW(apps::writeLinePlot(flat, {line}, options));
    const Image im = load(flat);
    const HorizontalLine h = findHorizontal(im, line.rgb);
    EXPECT_GT(h.right - h.left, im.width / 2);
    EXPECT_GT(h.row, im.height / 4);  // centred, not on the frame
    EXPECT_LT(h.row, im.height * 3 / 4);
  }
}

TEST(Plot, FailuresThrowNamingThePathAndLeaveNoFile) {
  Rng rng;
  TempDir dir(rng);
  const Series good = horizontal("a", 1.0, 9.0, 10, 31, 119, 180);
  const fs::path missing = dir.path / "no_such_dir" / "loss.png";
  try {
    apps::writeLinePlot(missing, {good}, {});
    ADD_FAILURE() << "writing into a missing directory did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string()), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(missing.parent_path()));

  const fs::path path = dir.path / "loss.png";
  Series nan{"nan", {0, 1, 2}, {NAN, NAN, INFINITY}};
  EXPECT_THROW(apps::writeLinePlot(path, {nan}, {}), std::runtime_error);
  EXPECT_THROW(apps::writeLinePlot(path, {}, {}), std::runtime_error);
  PlotOptions log;
  log.log_y = true;
  Series nonpositive{"zero", {0, 1}, {0.0, -2.0}};
  EXPECT_THROW(apps::writeLinePlot(path, {nonpositive}, log), std::runtime_error);
  Series ragged{"ragged", {0, 1, 2}, {1, 2}};
  EXPECT_THROW(apps::writeLinePlot(path, {ragged}, {}), std::runtime_error);
  EXPECT_TRUE(fs::is_empty(dir.path));

  // Rewriting replaces the file whole and leaves no temporary beside it.
  { std::ofstream(path) << "old"; }
  ASSERT_NO_THROW(apps::writeLinePlot(path, {good}, {}));
  ASSERT_NO_THROW(apps::writeLinePlot(path, {good}, {}));
  EXPECT_EQ(load(path).width, PlotOptions{}.width);
  int files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++files;
  EXPECT_EQ(files, 1);
}

}  // namespace
}  // namespace vkgrad::test
