#include "gpt/model_source.h"

#include "vkgrad/core/error.h"
#include "vkgrad/gpt/checkpoint.h"

namespace vkgrad::apps {

namespace {

// The offset of the first byte that is not part of valid UTF-8 (no overlong forms, no
// surrogates, nothing above U+10FFFF), or npos.
size_t invalidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2, cp = c & 0x1F, min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, cp = c & 0x0F, min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, cp = c & 0x07, min = 0x10000;
    } else {
      return i;
    }
    if (i + len > s.size()) return i;
    for (size_t k = 1; k < len; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return i;
      cp = cp << 6 | (d & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

}  // namespace

std::vector<uint32_t> ModelSource::encode(std::string_view text, const std::string& what,
                                          bool prompt) const {
  if (vocab) return vocab->encode(text);
  if (const size_t bad = invalidUtf8(text); bad != std::string_view::npos)
    throw Error(what + " is not valid UTF-8 (byte " + std::to_string(bad) +
                "): a Hugging Face tokenizer encodes text");
  return tokenizer->encodeWithTemplate(text, /*open=*/prompt);
}

std::string ModelSource::decode(std::span<const uint32_t> ids, bool continuation) const {
  if (vocab) return vocab->decode(ids);
  // A model's vocabulary may be padded past its tokenizer's (config.json's vocab_size rounded
  // up): a sampled id in the padding stands for no text, as Hugging Face's decoders skip it.
  std::vector<uint32_t> known;
  for (const uint32_t id : ids)
    if (id < tokenizer->size()) known.push_back(id);
  return tokenizer->decode(known, /*skip_special=*/false, continuation);
}

namespace {

// A Hugging Face folder or a vkgrad-gpt checkpoint.
ModelSource readFolder(const std::filesystem::path& dir) {
  ModelSource source;
  source.dir = dir;
  if (!hf::isHfFolder(dir)) {
    gpt::GptCheckpoint cp = gpt::readConfig(dir);
    source.config = cp.config;
    source.vocab = std::move(cp.vocab);
    return source;
  }
  source.hf = hf::readHfModel(dir);
  source.config = source.hf->gpt;
  source.tokenizer = std::make_shared<const tokenizers::Tokenizer>(tokenizers::loadTokenizer(dir));
  if (source.tokenizer->size() > uint64_t(source.config.vocab))
    throw Error(dir.string() + ": the tokenizer has " + std::to_string(source.tokenizer->size()) +
                " ids, more than the model's vocab_size " + std::to_string(source.config.vocab));
  return source;
}

// The folder an adapter's base_model_name_or_path names (see readModelSource).
std::filesystem::path adapterBase(const std::filesystem::path& adapter) {
  const std::string base = hf::readHfLoraConfig(adapter).base;
  const std::string where = (adapter / hf::kAdapterConfigFile).string();
  if (base.empty())
    throw Error(where + ": no base_model_name_or_path (give --checkpoint BASE --adapter DIR)");
  std::error_code ec;
  for (const std::filesystem::path& p : {std::filesystem::path(base), adapter / base})
    if (std::filesystem::is_directory(p, ec)) return p;
  throw Error(where + ": base_model_name_or_path \"" + base +
              "\" is no folder here (a hub name is not downloaded: give --checkpoint BASE "
              "--adapter DIR)");
}

}  // namespace

ModelSource readModelSource(const std::filesystem::path& dir_or_adapter,
                            const std::filesystem::path& adapter_dir) {
  std::filesystem::path dir = dir_or_adapter, adapter = adapter_dir;
  if (adapter.empty() && !hf::isHfFolder(dir) && hf::isHfAdapterFolder(dir)) {
    adapter = dir;
    dir = adapterBase(adapter);
  }
  ModelSource source = readFolder(dir);
  if (adapter.empty()) return source;
  if (!source.huggingFace())
    throw Error(dir.string() +
                ": an adapter needs a Hugging Face base folder, not a vkgrad-gpt "
                "checkpoint");
  source.lora = hf::readHfLora(adapter, *source.hf);
  return source;
}

std::unique_ptr<graph::ParameterStore> loadParameters(vk::Context& context,
                                                      const ModelSource& source) {
  auto store = std::make_unique<graph::ParameterStore>(context);
  if (source.lora) {
    hf::loadHfLora(*store, *source.hf, *source.lora, /*train=*/false, /*seed=*/0);
    return store;
  }
  if (source.hf) {
    hf::loadHfModel(*store, *source.hf, /*frozen=*/true);
    return store;
  }
  gpt::declareGpt(*store, source.config);
  try {
    store->load(source.dir / gpt::kModelFile);
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "\n(the checkpoint's model does not match its " +
                gpt::kConfigFile + ")");
  }
  return store;
}

}  // namespace vkgrad::apps
