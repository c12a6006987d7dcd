#include "vkgrad/vae/checkpoint.h"

#include "vkgrad/core/error.h"

namespace vkgrad::vae {

using graph::Json;

namespace {

constexpr int kVersion = 1;

}  // namespace

void writeConfig(const std::filesystem::path& dir, const VaeCheckpoint& checkpoint) {
  const VaeConfig& c = checkpoint.config;
  c.validate();
  const Json model = {{"image", c.image},
                      {"hidden", c.hidden},
                      {"latent", c.latent},
                      {"recon", reconstructionName(c.recon)},
                      {"beta", c.beta}};
  graph::writeCheckpointFile(dir, kConfigFile, "vkgrad-vae", kVersion, model, checkpoint.training);
}

VaeCheckpoint readConfig(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kConfigFile;
  const Json root = graph::readCheckpointFile(dir, kConfigFile, "vkgrad-vae");
  try {
    graph::jsonCheckFormat(root, "vkgrad-vae", kVersion);
    const Json& m = graph::jsonObject(root, "model");
    VaeCheckpoint cp;
    VaeConfig& c = cp.config;
    c.image = graph::jsonPositive(m, "image", 4096);
    const Json& hidden = graph::jsonMember(m, "hidden");
    if (!hidden.is_array() || hidden.empty() || hidden.size() > 8)
      throw Error("\"hidden\" must be an array of 1 to 8 widths");
    c.hidden.clear();
    for (const Json& w : hidden)
      c.hidden.push_back(int64_t(graph::jsonUint(w, "\"hidden\"", 65536)));
    c.latent = graph::jsonPositive(m, "latent", 4096);
    c.recon = reconstructionFromName(graph::jsonString(m, "recon"));
    c.beta = float(graph::jsonNumber(m, "beta"));
    c.validate();
    if (const auto t = root.find("training"); t != root.end()) cp.training = *t;
    return cp;
  } catch (const Error& e) {
    throw Error(path.string() + ": " + e.what());
  }
}

}  // namespace vkgrad::vae
