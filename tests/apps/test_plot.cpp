// writeLinePlot and writeScatterPlot draw each point where the axes say, skip what cannot be
// drawn, and write a whole PNG or nothing. The PNGs are read back with stb_image.
#include "common/plot.h"

#include <gtest/gtest.h>
#include <stb_image.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "common/random.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;
using apps::PlotOptions;
using apps::PointGroup;
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

// Text and frame are dark grey (ink 30, frame 70); grid lines, white and the series' colours
// are not.
bool dark(const Image& im, int x, int y) {
  const unsigned char* p = &im.rgb[(size_t(y) * size_t(im.width) + size_t(x)) * 3];
  return p[0] < 120 && p[1] < 120 && p[2] < 120;
}

TEST(Plot, TitleAndAxisLabelsFillTheMarginsWithNoEmptyBand) {
  Rng rng;
  TempDir dir(rng);
  Series line = horizontal("a", 1.0, 9.0, 10, 31, 119, 180);
  line.y[5] = 2.0;
  PlotOptions options{"Title", "step", "loss (nats)"};
  options.width = 600 + int(rng.below(300)), options.height = 400 + int(rng.below(200));
  const fs::path path = dir.path / "labels.png";
  ASSERT_NO_THROW(apps::writeLinePlot(path, {line}, options));
  const Image im = load(path);
  int top = im.height, bottom = -1, left = im.width;
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x)
      if (dark(im, x, y))
        top = std::min(top, y), bottom = std::max(bottom, y), left = std::min(left, x);
  // The title's capitals start a pad (8 px) and the font's room above capitals (3 px at 15 px)
  // below the top; "step" hangs its 'p' to within 8 px and a little of the bottom; the
  // rotated y label starts 8 px in. 14: those and a few pixels of slack, where a layout sized
  // for other text (or a font other than the measured one) leaves bands of 20 and more.
  EXPECT_LE(top, 14) << rng.describe();
  EXPECT_GE(bottom, im.height - 14) << rng.describe();
  EXPECT_LE(left, 14) << rng.describe();
  // The title's ink is at least 11 px tall ('T' is 0.73 of its 15 px): rows of dark pixels
  // in the top band above the frame, centred over the picture.
  int title_rows = 0, title_x0 = im.width, title_x1 = -1;
  for (int y = 0; y < 30; ++y) {
    bool any = false;
    for (int x = 0; x < im.width; ++x)
      if (dark(im, x, y))
        any = true, title_x0 = std::min(title_x0, x), title_x1 = std::max(title_x1, x);
    title_rows += any;
  }
  EXPECT_GE(title_rows, 10);
  EXPECT_NEAR(0.5 * (title_x0 + title_x1), 0.5 * im.width, 40) << rng.describe();
}

double uniform(Rng& rng, double lo, double hi) {
  return rng.uniform(1, float(lo), float(hi))[0];
}

PointGroup group(const std::string& label, int colour) {
  PointGroup g{label};
  std::copy_n(apps::categoricalColour(colour), 3, g.rgb);
  return g;
}

// The largest difference of any channel of pixel (x, y) from c.
int channelDistance(const Image& im, int x, int y, const unsigned char c[3]) {
  const unsigned char* p = &im.rgb[(size_t(y) * size_t(im.width) + size_t(x)) * 3];
  int d = 0;
  for (int i = 0; i < 3; ++i) d = std::max(d, std::abs(int(p[i]) - int(c[i])));
  return d;
}

// The mean position (continuous coordinates, pixel centres at +0.5) of the pixels within
// `tolerance` of c on every channel, and how many there are.
struct Centroid {
  double x = 0, y = 0;
  int count = 0;
};

Centroid centroid(const Image& im, const unsigned char c[3], int tolerance) {
  Centroid r;
  for (int y = 0; y < im.height; ++y) {
    for (int x = 0; x < im.width; ++x) {
      if (channelDistance(im, x, y, c) > tolerance) continue;
      r.x += x + 0.5, r.y += y + 0.5, ++r.count;
    }
  }
  if (r.count > 0) r.x /= r.count, r.y /= r.count;
  return r;
}

TEST(Plot, ScatterDrawsEachGroupWhereItsPointsAre) {
  Rng rng;
  TempDir dir(rng);
  const double x0 = uniform(rng, -100, 100), dx = uniform(rng, 0.01, 50);
  const double y0 = uniform(rng, -100, 100), dy = uniform(rng, 0.01, 50);
  const double f = uniform(rng, 0.2, 0.8), g = uniform(rng, 0.2, 0.8);
  const double f_lone = uniform(rng, 0.2, 0.8), g_lone = uniform(rng, 0.2, 0.8);
  // Four stacks of points, unlabelled (no legend to find instead): A at the origin of a
  // parallelogram, B along x, C along y, D inside at (f, g). 150 blends of one dot saturate the
  // stack's middle pixels to the group's colour.
  PointGroup a = group("", 0), b = group("", 1), c = group("", 2), d = group("", 3);
  PointGroup lone = group("", 4);
  auto stack = [](PointGroup& pg, double x, double y) {
    pg.x.assign(150, x);
    pg.y.assign(150, y);
  };
  stack(a, x0, y0);
  stack(b, x0 + dx, y0);
  stack(c, x0, y0 + dy);
  stack(d, x0 + f * dx, y0 + g * dy);
  lone.x = {x0 + f_lone * dx}, lone.y = {y0 + g_lone * dy};
  // Not drawable: skipped, not an error, and not part of the axes' range.
  a.x.push_back(NAN), a.y.push_back(y0);
  b.x.push_back(x0), b.y.push_back(INFINITY);
  c.x.push_back(-INFINITY), c.y.push_back(-1e300);
  PlotOptions options{"latent", "z0", "z1"};
  options.width = 617, options.height = 541;
  const fs::path path = dir.path / "scatter.png";
  ASSERT_NO_THROW(apps::writeScatterPlot(path, {a, b, c, d, lone}, options)) << rng.describe();

  const Image im = load(path);
  ASSERT_EQ(im.width, 617);
  ASSERT_EQ(im.height, 541);
  // 4: the saturated pixels stall within rounding (a blend step under half a unit) of the colour.
  const Centroid ca = centroid(im, a.rgb, 4), cb = centroid(im, b.rgb, 4),
                 cc = centroid(im, c.rgb, 4), cd = centroid(im, d.rgb, 4);
  for (const Centroid* ct : {&ca, &cb, &cc, &cd}) ASSERT_GE(ct->count, 4) << rng.describe();
  // The parallelogram spans most of the plot (x right, y up) ...
  EXPECT_GT(cb.x - ca.x, im.width / 2);
  EXPECT_NEAR(cb.y, ca.y, 0.5);
  EXPECT_GT(ca.y - cc.y, im.height / 2);
  EXPECT_NEAR(cc.x, ca.x, 0.5);
  // ... and the mapping is affine: D sits at A + f (B - A) + g (C - A). Each centroid is within
  // half a pixel of its dot's centre (the saturated pixels lie symmetrically around it).
  EXPECT_NEAR(cd.x, ca.x + f * (cb.x - ca.x) + g * (cc.x - ca.x), 1.5) << rng.describe();
  EXPECT_NEAR(cd.y, ca.y + f * (cb.y - ca.y) + g * (cc.y - ca.y), 1.5) << rng.describe();
  // The lone point is there too, semi-transparent: its darkest pixel is near its colour
  // (within 26: at most a tenth of the way back to white at the opacity for 600 points, 0.9)
  // but not on it.
  const double lx = ca.x + f_lone * (cb.x - ca.x) + g_lone * (cc.x - ca.x);
  const double ly = ca.y + f_lone * (cb.y - ca.y) + g_lone * (cc.y - ca.y);
  int nearest = 255;
  for (int y = int(ly) - 2; y <= int(ly) + 2; ++y)
    for (int x = int(lx) - 2; x <= int(lx) + 2; ++x)
      nearest = std::min(nearest, channelDistance(im, x, y, lone.rgb));
  EXPECT_LE(nearest, 26) << rng.describe();
  EXPECT_GE(nearest, 3) << rng.describe();
}

// The legend box's border colour (common/plot_frame.cpp): grey, which no blend of the
// non-grey categorical colours over white or grid lines produces.
constexpr unsigned char kLegendBorder[3] = {190, 190, 190};

struct Box {
  int x0 = 1 << 30, y0 = 1 << 30, x1 = -1, y1 = -1;  // inclusive
  bool contains(int x, int y) const { return x >= x0 && x <= x1 && y >= y0 && y <= y1; }
};

// The box around the runs of at least 20 pixels of colour c in a row: the legend's top and
// bottom borders. Anti-aliased text has pixels of that grey too, but never 20 in a row.
Box boxOf(const Image& im, const unsigned char c[3]) {
  Box b;
  for (int y = 0; y < im.height; ++y) {
    for (int x = 0, run = 0; x < im.width; ++x) {
      run = im.is(x, y, c) ? run + 1 : 0;
      if (run < 20) continue;
      b.x0 = std::min(b.x0, x - run + 1), b.y0 = std::min(b.y0, y);
      b.x1 = std::max(b.x1, x), b.y1 = std::max(b.y1, y);
    }
  }
  return b;
}

TEST(Plot, ScatterLegendHidesNoPoint) {
  Rng rng;
  TempDir dir(rng);
  auto fill = [&](PointGroup& pg, double x_lo, double y_lo, double side, int n) {
    const std::vector<float> u = rng.uniform(size_t(2 * n), 0.0f, 1.0f);
    for (int i = 0; i < n; ++i) {
      pg.x.push_back(x_lo + side * u[size_t(2 * i)]);
      pg.y.push_back(y_lo + side * u[size_t(2 * i + 1)]);
    }
  };
  // Colour 7 is grey: left out, so the border's grey is the legend's alone.
  std::vector<PointGroup> groups = {group("first", 0), group("second", 1), group("third", 2),
                                    group("", 3)};  // an unlabelled group gets no row
  const fs::path path = dir.path / "scatter.png";

  // Three quadrants full, the top left empty: the legend goes there, inside the plot.
  fill(groups[0], 0.0, 0.0, 0.5, 400);
  fill(groups[1], 0.5, 0.0, 0.5, 400);
  fill(groups[2], 0.5, 0.5, 0.5, 400);
  fill(groups[3], 0.0, 0.0, 1.0, 0);
  ASSERT_NO_THROW(apps::writeScatterPlot(path, groups, {"corner"}));
  Image im = load(path);
  Box legend = boxOf(im, kLegendBorder);
  ASSERT_GE(legend.x1, 0) << "no legend box";
  EXPECT_LT(legend.x1, im.width / 2) << rng.describe();
  EXPECT_LT(legend.y1, im.height / 2) << rng.describe();
  int text = 0;
  for (int y = legend.y0; y <= legend.y1; ++y)
    for (int x = legend.x0; x <= legend.x1; ++x) text += dark(im, x, y);
  EXPECT_GT(text, 60);                   // three labels
  EXPECT_LT(legend.y1 - legend.y0, 66);  // three rows (58 px tall at scale 1), not four (74)

  // Points everywhere: no corner is free, so the legend goes right of every dot.
  fill(groups[3], 0.0, 0.0, 1.0, 1200);
  ASSERT_NO_THROW(apps::writeScatterPlot(path, groups, {"outside"}));
  im = load(path);
  legend = boxOf(im, kLegendBorder);
  ASSERT_GE(legend.x1, 0) << "no legend box";
  int rightmost_dot = -1;  // coloured pixels (channels apart) outside the legend
  for (int y = 0; y < im.height; ++y) {
    for (int x = 0; x < im.width; ++x) {
      const unsigned char* p = &im.rgb[(size_t(y) * size_t(im.width) + size_t(x)) * 3];
      const int chroma = std::max({p[0], p[1], p[2]}) - std::min({p[0], p[1], p[2]});
      if (chroma > 10 && !legend.contains(x, y)) rightmost_dot = std::max(rightmost_dot, x);
    }
  }
  EXPECT_GT(rightmost_dot, im.width / 2);
  EXPECT_GT(legend.x0, rightmost_dot) << rng.describe();
  EXPECT_LT(legend.x1, im.width);
}

TEST(Plot, ScatterFailuresThrowNamingThePathAndLeaveNoFile) {
  Rng rng;
  TempDir dir(rng);
  const fs::path path = dir.path / "scatter.png";
  PointGroup ragged = group("ragged", 0);
  ragged.x = {0, 1, 2}, ragged.y = {1, 2};
  try {
    apps::writeScatterPlot(path, {ragged}, {});
    ADD_FAILURE() << "x and y of different lengths did not throw";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("ragged"), std::string::npos) << e.what();
  }
  PointGroup nan = group("nan", 1);
  nan.x = {0, NAN, INFINITY}, nan.y = {NAN, 1, 2};
  EXPECT_THROW(apps::writeScatterPlot(path, {nan}, {}), std::runtime_error);
  EXPECT_THROW(apps::writeScatterPlot(path, {group("empty", 2)}, {}), std::runtime_error);
  EXPECT_THROW(apps::writeScatterPlot(path, {}, {}), std::runtime_error);
  PointGroup good = group("good", 3);
  good.x = {0, 1}, good.y = {0, 1};
  PlotOptions tiny;
  tiny.width = 40, tiny.height = 30;
  EXPECT_THROW(apps::writeScatterPlot(path, {good}, tiny), std::runtime_error);
  EXPECT_TRUE(fs::is_empty(dir.path));

  const fs::path missing = dir.path / "no_such_dir" / "scatter.png";
  EXPECT_THROW(apps::writeScatterPlot(missing, {good}, {}), std::runtime_error);
  EXPECT_FALSE(fs::exists(missing.parent_path()));
}

TEST(Plot, CategoricalColoursAreDistinctAndRepeatEveryTen) {
  for (int i = 0; i < 10; ++i) {
    for (int j = i + 1; j < 10; ++j) {
      const unsigned char *a = apps::categoricalColour(i), *b = apps::categoricalColour(j);
      int distance = 0;
      for (int k = 0; k < 3; ++k) distance += std::abs(int(a[k]) - int(b[k]));
      // Summed channel differences; tab10's closest pair (purple, pink) is 100 apart.
      EXPECT_GT(distance, 60) << i << " vs " << j;
    }
    EXPECT_TRUE(std::equal(apps::categoricalColour(i), apps::categoricalColour(i) + 3,
                           apps::categoricalColour(i + 10)));
    EXPECT_TRUE(std::equal(apps::categoricalColour(i), apps::categoricalColour(i) + 3,
                           apps::categoricalColour(i - 30)));
  }
}

}  // namespace
}  // namespace vkgrad::test
