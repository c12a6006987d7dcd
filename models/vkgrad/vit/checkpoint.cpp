#include "vkgrad/vit/checkpoint.h"

#include "vkgrad/core/error.h"

namespace vkgrad::vit {

using graph::Json;

namespace {

constexpr int kVersion = 1;

}  // namespace

void writeConfig(const std::filesystem::path& dir, const VitCheckpoint& checkpoint) {
  const VitConfig& c = checkpoint.config;
  if (int64_t(checkpoint.class_names.size()) != c.classes)
    throw Error("writeConfig: " + std::to_string(checkpoint.class_names.size()) +
                " class names for " + std::to_string(c.classes) + " classes");
  // A ViT's model object is as it was before the CNN existed (no "kind": a ViT), so its
  // config.json keeps its bytes.
  const Json model = c.kind == ModelKind::Cnn
                         ? Json{{"kind", modelKindName(c.kind)},
                                {"image", c.image},
                                {"classes", c.classes},
                                {"conv1", c.conv1},
                                {"conv2", c.conv2},
                                {"hidden", c.hidden},
                                {"dropout", c.dropout},
                                {"augment_pad", c.augment_pad},
                                {"augment_flip", c.augment_flip},
                                {"mean", c.mean},
                                {"stddev", c.stddev}}
                         : Json{
                               {"image", c.image},
                               {"patch", c.patch},
                               {"classes", c.classes},
                               {"width", c.width},
                               {"layers", c.layers},
                               {"heads", c.heads},
                               {"mlp_ratio", c.mlp_ratio},
                               {"norm", nn::normName(c.norm)},
                               {"activation", ops::activationName(c.activation.kind)},
                               {"activation_param", c.activation.param},
                               {"dropout", c.dropout},
                               {"augment_pad", c.augment_pad},
                               {"augment_flip", c.augment_flip},
                               {"mean", c.mean},
                               {"stddev", c.stddev},
                           };
  graph::writeCheckpointFile(dir, kConfigFile, "vkgrad-vit", kVersion, model, checkpoint.training,
                             {{"class_names", checkpoint.class_names}});
}

VitCheckpoint readConfig(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kConfigFile;
  const Json root = graph::readCheckpointFile(dir, kConfigFile, "vkgrad-vit");
  try {
    graph::jsonCheckFormat(root, "vkgrad-vit", kVersion);
    const Json& m = graph::jsonObject(root, "model");
    VitCheckpoint cp;
    VitConfig& c = cp.config;
    // Configs without a kind are ViTs (all of them before the CNN existed).
    if (m.contains("kind")) c.kind = modelKindFromName(graph::jsonString(m, "kind"));
    c.image = graph::jsonPositive(m, "image", 4096);
    if (c.kind == ModelKind::Vit) c.patch = graph::jsonPositive(m, "patch", 4096);
    c.classes = graph::jsonPositive(m, "classes", 1 << 16);
    if (c.kind == ModelKind::Cnn) {
      c.conv1 = graph::jsonPositive(m, "conv1", 1024);
      c.conv2 = graph::jsonPositive(m, "conv2", 1024);
      c.hidden = graph::jsonPositive(m, "hidden", 16384);
    } else {
      c.width = graph::jsonPositive(m, "width", 4096);
      c.layers = graph::jsonPositive(m, "layers", 64);
      c.heads = graph::jsonPositive(m, "heads", 4096);
      c.mlp_ratio = graph::jsonPositive(m, "mlp_ratio", 16);
      c.norm = nn::normFromName(graph::jsonString(m, "norm"));
      c.activation = {nn::mlpActivationFromName(graph::jsonString(m, "activation")),
                      float(graph::jsonNumber(m, "activation_param"))};
    }
    c.dropout = float(graph::jsonNumber(m, "dropout"));
    // Configs written before augmentation existed have neither field: no augmentation.
    if (m.contains("augment_pad"))
      c.augment_pad = int64_t(graph::jsonUint(m.at("augment_pad"), "\"augment_pad\"", 4096));
    if (m.contains("augment_flip")) c.augment_flip = graph::jsonBool(m, "augment_flip");
    c.mean = float(graph::jsonNumber(m, "mean"));
    c.stddev = float(graph::jsonNumber(m, "stddev"));
    c.validate();
    cp.class_names = graph::jsonStrings(root, "class_names", size_t(c.classes));
    if (const auto t = root.find("training"); t != root.end()) cp.training = *t;
    return cp;
  } catch (const Error& e) {
    throw Error(path.string() + ": " + e.what());
  }
}

}  // namespace vkgrad::vit
