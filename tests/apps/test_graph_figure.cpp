// writeGraphPng cuts the picture to what it draws (no empty band under a wide drawing) and
// writes node numbers legibly inside the nodes; layoutGraph is seeded and fills [0, 1]^2.
#include "common/graph_figure.h"

#include <gtest/gtest.h>
#include <stb_image.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/plot.h"
#include "common/random.h"

namespace vkgrad::test {
namespace {

namespace fs = std::filesystem;

struct Image {
  int width = 0, height = 0;
  std::vector<unsigned char> rgb;
  const unsigned char* at(int x, int y) const {
    return &rgb[(size_t(y) * size_t(width) + size_t(x)) * 3];
  }
  bool white(int x, int y) const {
    return at(x, y)[0] == 255 && at(x, y)[1] == 255 && at(x, y)[2] == 255;
  }
};

Image load(const fs::path& path) {
  Image im;
  int channels = 0;
  unsigned char* data = stbi_load(path.string().c_str(), &im.width, &im.height, &channels, 3);
  if (!data) throw std::runtime_error("stbi_load failed on " + path.string());
  im.rgb.assign(data, data + size_t(im.width) * size_t(im.height) * 3);
  stbi_image_free(data);
  return im;
}

// A chain of n nodes along a thin band: a drawing much wider than tall.
apps::GraphPicture chain(int n, Rng& rng) {
  apps::GraphPicture pic;
  pic.title = "chain";
  for (int i = 0; i < n; ++i) {
    pic.positions.push_back({double(i) / (n - 1), 0.45 + 0.1 * rng.uniform(1, 0.0f, 1.0f)[0]});
    if (i > 0) pic.edges.push_back({uint32_t(i - 1), uint32_t(i)});
    pic.node_class.push_back(0);  // categorical colour 0: blue, so numbers are white
    pic.labelled.push_back(i == 0);
    pic.wrong.push_back(false);
  }
  pic.class_names = {"only"};
  return pic;
}

TEST(GraphFigure, WideDrawingLeavesNoEmptyBand) {
  Rng rng;
  const int n = 8 + int(rng.below(10));
  const apps::GraphPicture pic = chain(n, rng);
  const fs::path path =
      fs::temp_directory_path() / ("vkgrad_test_graph_" + std::to_string(rng.seed()) + ".png");
  apps::writeGraphPng(path, pic, 900, 800);
  const Image im = load(path);
  fs::remove(path);
  EXPECT_LE(im.width, 900);
  // The drawing is about a tenth as tall as wide; the picture holds it, the title and the
  // legend's five rows (about 160 px), not the 800 px asked for.
  EXPECT_LT(im.height, 260) << rng.describe();
  int last_row = -1;
  for (int y = 0; y < im.height; ++y)
    for (int x = 0; x < im.width; ++x)
      if (!im.white(x, y)) last_row = y;
  EXPECT_GT(last_row, im.height - 24) << "an empty band under the drawing " << rng.describe();
}

TEST(GraphFigure, NodeNumbersAreDrawnInsideTheNodes) {
  Rng rng;
  apps::GraphPicture pic = chain(12, rng);
  pic.title.clear();
  const fs::path path =
      fs::temp_directory_path() / ("vkgrad_test_graph_n_" + std::to_string(rng.seed()) + ".png");
  apps::writeGraphPng(path, pic, 900, 400);
  const Image im = load(path);
  fs::remove(path);
  // Each node is a blue disc (categorical colour 0) with its number in white, the colour
  // that reads on blue: count the near-white pixels with blue on both sides within 8 pixels
  // along their row. A dozen one- and two-digit numbers of 11 px bold make several hundred;
  // numbers in black, or none, make none.
  const unsigned char* blue = apps::categoricalColour(0);
  auto isBlue = [&](int x, int y) {
    const unsigned char* p = im.at(x, y);
    return std::abs(p[0] - blue[0]) < 8 && std::abs(p[1] - blue[1]) < 8 &&
           std::abs(p[2] - blue[2]) < 8;
  };
  int enclosed = 0;
  for (int y = 0; y < im.height; ++y) {
    for (int x = 1; x + 1 < im.width; ++x) {
      const unsigned char* p = im.at(x, y);
      if (p[0] < 230 || p[1] < 230 || p[2] < 230) continue;
      bool left = false, right = false;
      for (int d = 1; d <= 8 && x - d >= 0; ++d) left = left || isBlue(x - d, y);
      for (int d = 1; d <= 8 && x + d < im.width; ++d) right = right || isBlue(x + d, y);
      enclosed += left && right;
    }
  }
  EXPECT_GT(enclosed, 12 * 10) << rng.describe();
}

}  // namespace
}  // namespace vkgrad::test
