#include "vit/options.h"

#include "vkgrad/core/error.h"
#include "vkgrad/data/idx.h"

namespace vkgrad::apps {

void declareModelOptions(Cli& cli) {
  cli.option("data", "folder of the IDX files (plain or .gz)", data::kFashionMnistDir);
  cli.option("model",
             "vit (a vision transformer) or cnn (two 5x5 convolutions with max pooling and a "
             "hidden layer: --conv1, --conv2, --hidden; the ViT's shape options then unused)",
             "vit");
  cli.option("conv1", "CNN: channels of the first convolution", "32");
  cli.option("conv2", "CNN: channels of the second convolution", "64");
  cli.option("hidden", "CNN: width of the hidden layer", "1024");
  cli.option("patch", "patch size in pixels (a divisor of 28)", "7");
  cli.option("width", "model width (a multiple of heads)", "64");
  cli.option("layers", "transformer blocks", "4");
  cli.option("heads", "attention heads per block", "4");
  cli.option("mlp-ratio", "MLP hidden width / model width", "2");
  cli.option("dropout", "dropout probability", "0");
  cli.option("norm", "pre (pre-norm blocks and a final norm) or post (the original transformer)",
             "pre");
  cli.option("augment-pad", "shift training images by up to N pixels each way (0: off, < 14)", "0");
  cli.flag("augment-flip", "mirror training images left to right half the time");
  cli.option("batch", "images per step", "128");
  cli.option("limit", "train on the first N images only (0: all)", "0");
  cli.option("class-names",
             "the classes' names, comma-separated (default: Fashion-MNIST's; for MNIST: "
             "0,1,2,3,4,5,6,7,8,9)");
}

// --class-names: comma-separated, one per class; the default names Fashion-MNIST's.
std::vector<std::string> classNames(const Cli& cli, int64_t classes) {
  const std::string text = cli.get("class-names");
  if (text.empty())
    return {std::begin(data::kFashionMnistClasses), std::end(data::kFashionMnistClasses)};
  std::vector<std::string> names;
  size_t begin = 0;
  while (true) {
    const size_t comma = text.find(',', begin);
    names.push_back(text.substr(begin, comma - begin));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  if (int64_t(names.size()) != classes)
    cli.fail("--class-names lists " + std::to_string(names.size()) + " names for " +
             std::to_string(classes) + " classes");
  return names;
}

vit::VitConfig configFromCli(const Cli& cli) {
  vit::VitConfig c;
  try {
    c.kind = vit::modelKindFromName(cli.get("model"));
  } catch (const Error& e) {
    cli.fail(std::string("--model: ") + e.what());
  }
  c.conv1 = cli.getInt("conv1", 1, 1024);
  c.conv2 = cli.getInt("conv2", 1, 1024);
  c.hidden = cli.getInt("hidden", 1, 16384);
  c.patch = cli.getInt("patch", 1, 28);
  c.width = cli.getInt("width", 1, 4096);
  c.layers = cli.getInt("layers", 1, 64);
  c.heads = cli.getInt("heads", 1, 4096);
  c.mlp_ratio = cli.getInt("mlp-ratio", 1, 16);
  c.dropout = float(cli.getDouble("dropout", 0.0, 0.99));
  try {
    c.norm = nn::normFromName(cli.get("norm"));
  } catch (const Error& e) {
    cli.fail(std::string("--norm: ") + e.what());
  }
  c.augment_pad = cli.getInt("augment-pad", 0, 4096);
  c.augment_flip = cli.has("augment-flip");
  try {
    c.validate();
  } catch (const Error& e) {
    cli.fail(e.what());
  }
  return c;
}

}  // namespace vkgrad::apps
