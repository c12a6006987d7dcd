#include "vae/pictures.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "common/figures.h"
#include "common/plot.h"
#include "vkgrad/vae/codec.h"

namespace vkgrad::apps {

namespace fs = std::filesystem;

// count points of N(0, I) in `latent` dimensions.
std::vector<float> normalPoints(int64_t count, int64_t latent, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> z(size_t(count * latent));
  for (float& v : z) v = normal(rng);
  return z;
}

std::vector<GridImage> tiles(const std::vector<uint8_t>& pixels, size_t image) {
  std::vector<GridImage> grid;
  for (size_t i = 0; i + image <= pixels.size(); i += image)
    grid.push_back({std::span(pixels).subspan(i, image), "", false});
  return grid;
}

namespace {

// The standard normal's quantile function, by bisection on its CDF (pictures only).
double normalQuantile(double p) {
  double lo = -10, hi = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

// For a 2-D latent: the test set's means by class, and the decoder over a grid of z.
void writeLatentPictures(const fs::path& out, vae::Encoder& encoder, vae::Decoder& decoder,
                         const vae::VaeConfig& config, const data::Images& images,
                         std::span<const uint8_t> labels, const std::vector<std::string>& names) {
  const size_t image = size_t(config.pixels());
  const int side = int(config.image);
  const std::vector<float> mu = encoder.means(images.pixels);
  std::vector<PointGroup> groups(names.size());
  for (size_t c = 0; c < names.size(); ++c) {
    groups[c].label = names[c];
    std::copy_n(categoricalColour(int(c)), 3, groups[c].rgb);
  }
  for (int64_t i = 0; i < images.count; ++i) {
    PointGroup& g = groups[labels[size_t(i)] % names.size()];
    g.x.push_back(mu[size_t(2 * i)]);
    g.y.push_back(mu[size_t(2 * i + 1)]);
  }
  PlotOptions plot;
  plot.title = "vkgrad-vae: test set means mu by class";
  plot.x_label = "z1";
  plot.y_label = "z2";
  plot.width = 900;
  plot.height = 720;
  writeScatterPlot(out / "latent.png", groups, plot);

  // The decoder over a 20 x 20 grid of evenly spaced quantiles of N(0, 1) in each axis.
  const int n = 20;
  std::vector<float> grid;
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < n; ++c) {
      grid.push_back(float(normalQuantile((c + 0.5) / n)));
      grid.push_back(float(normalQuantile(1.0 - (r + 0.5) / n)));  // z2 grows upwards
    }
  const std::vector<uint8_t> manifold = vae::toBytes(decoder.decode(grid));
  writeImageGridPng(out / "manifold.png", tiles(manifold, image), side, side, n, 2,
                    "vkgrad-vae: the decoder over z1 (right) and z2 (up), quantiles 2.5-97.5%");
}

// Straight lines between the means of pairs of test images, decoded.
void writeInterpolation(const fs::path& out, vae::Encoder& encoder, vae::Decoder& decoder,
                        const vae::VaeConfig& config, const data::Images& images) {
  const size_t image = size_t(config.pixels());
  const int side = int(config.image);
  // Straight lines between the means of pairs of test images, 10 steps each.
  const int pairs_n = 8, steps = 10;
  const int64_t needed = std::min<int64_t>(2 * pairs_n, images.count);
  const std::vector<float> mu =
      encoder.means(std::span(images.pixels).first(size_t(needed) * image));
  std::vector<float> line;
  const size_t latent = size_t(config.latent);
  for (int p = 0; 2 * p + 1 < needed; ++p)
    for (int s = 0; s < steps; ++s) {
      const float t = float(s) / float(steps - 1);
      for (size_t j = 0; j < latent; ++j)
        line.push_back((1 - t) * mu[size_t(2 * p) * latent + j] +
                       t * mu[size_t(2 * p + 1) * latent + j]);
    }
  const std::vector<uint8_t> decoded = vae::toBytes(decoder.decode(line));
  writeImageGridPng(out / "interpolation.png", tiles(decoded, image), side, side, steps, 3,
                    "vkgrad-vae: decoded straight lines between two test images' means");
}

}  // namespace

// The pictures a trained model gets: reconstructions and samples always; for a 2-D latent
// the test set's means by class and the decoder's manifold, otherwise interpolations.
// Returns the names written.
std::vector<std::string> writePictures(const fs::path& out, vk::Context& context,
                                       const graph::ParameterStore& store,
                                       const vae::VaeConfig& config, const data::Images& images,
                                       std::span<const uint8_t> labels,
                                       const std::vector<std::string>& names, uint64_t seed) {
  const size_t image = size_t(config.pixels());
  const int side = int(config.image);
  vae::Encoder encoder(context, store, config, 500);
  vae::Decoder decoder(context, store, config, 256);
  std::vector<std::string> written;

  // Reconstructions from the posterior means: 4 pairs of rows, test images over their decodings.
  const int64_t shown = std::min<int64_t>(48, images.count), per_row = 12;
  const std::span<const uint8_t> first = std::span(images.pixels).first(size_t(shown) * image);
  const std::vector<uint8_t> recon = vae::toBytes(decoder.decode(encoder.means(first)));
  std::vector<GridImage> pairs;
  for (int64_t row = 0; row * per_row < shown; ++row) {
    const int64_t n = std::min(per_row, shown - row * per_row);
    for (int64_t i = row * per_row; i < row * per_row + n; ++i)
      pairs.push_back({first.subspan(size_t(i) * image, image),
                       names[labels[size_t(i)] % names.size()], false});
    for (int64_t i = row * per_row; i < row * per_row + n; ++i)
      pairs.push_back({std::span(recon).subspan(size_t(i) * image, image), "decoded", false});
  }
  writeImageGridPng(out / "reconstructions.png", pairs, side, side, int(per_row), 3,
                    "vkgrad-vae: test images (odd rows) and their reconstructions from mu");
  written.push_back("reconstructions.png");

  const std::vector<uint8_t> samples =
      vae::toBytes(decoder.decode(normalPoints(100, config.latent, seed)));
  writeImageGridPng(out / "samples.png", tiles(samples, image), side, side, 10, 3,
                    "vkgrad-vae: decoded z ~ N(0, I)");
  written.push_back("samples.png");

  if (config.latent == 2) {
    writeLatentPictures(out, encoder, decoder, config, images, labels, names);
    written.insert(written.end(), {"latent.png", "manifold.png"});
  } else {
    writeInterpolation(out, encoder, decoder, config, images);
    written.push_back("interpolation.png");
  }
  return written;
}

}  // namespace vkgrad::apps
