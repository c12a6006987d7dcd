#include "vae/options.h"

#include <cstdio>

#include "vkgrad/core/error.h"

namespace vkgrad::apps {

void declareModelOptions(Cli& cli) {
  cli.option("data", "folder of the IDX files (plain or .gz)", data::kFashionMnistDir);
  cli.option("hidden", "the encoder's hidden widths, comma-separated (the decoder mirrors them)",
             "400");
  cli.option("latent", "latent dimensions (2 draws the latent space and its manifold)", "20");
  cli.option("recon", "reconstruction loss: bce (Bernoulli cross-entropy) or mse (squared error)",
             "bce");
  cli.option("beta", "weight of the KL term (1: the ELBO; beta-VAE otherwise)", "1");
  cli.option("batch", "images per step", "128");
  cli.option("limit", "train on the first N images only (0: all)", "0");
}

vae::VaeConfig configFromCli(const Cli& cli) {
  vae::VaeConfig c;
  try {
    c.hidden = vae::parseWidths(cli.get("hidden"));
    c.recon = vae::reconstructionFromName(cli.get("recon"));
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  c.latent = cli.getInt("latent", 1, 4096);
  c.beta = float(cli.getDouble("beta", 0.0, 1e6));
  try {
    c.validate();
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  return c;
}

std::vector<std::string> classNames(const std::string& data) {
  std::vector<std::string> names;
  for (int c = 0; c < 10; ++c)
    names.push_back(data == data::kFashionMnistDir ? data::kFashionMnistClasses[c]
                                                   : std::to_string(c));
  return names;
}

void printHeader(const vk::Context& context, const std::string& data, const data::ImageDataset& set,
                 const graph::ParameterStore& store, const vae::VaeConfig& config) {
  std::fprintf(stderr,
               "device: %s\ndata: %s: %lld training images, %lld test images\n"
               "model: %lld parameters; %lld-%s-%lld MLPs, %s reconstruction, beta %g\n",
               context.info().name.c_str(), data.c_str(),
               static_cast<long long>(set.train_images.count),
               static_cast<long long>(set.test_images.count),
               static_cast<long long>(store.elements()), static_cast<long long>(config.pixels()),
               vae::widthsText(config.hidden).c_str(), static_cast<long long>(config.latent),
               vae::reconstructionName(config.recon), double(config.beta));
}

}  // namespace vkgrad::apps
