#include "fuzz/targets.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "common/cli.h"
#include "common/process.h"
#include "vkgrad/core/error.h"
#include "vkgrad/data/idx.h"
#include "vkgrad/gnn/datasets.h"
#include "vkgrad/gpt/checkpoint.h"
#include "vkgrad/gpt/vocab.h"
#include "vkgrad/hf/config.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/hf/weights.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/npy.h"
#include "vkgrad/io/safetensors.h"
#ifdef VKGRAD_WITH_TOKENIZERS
#include "vkgrad/tokenizers/bpe_trainer.h"
#include "vkgrad/tokenizers/tokenizer_json.h"
#endif
#ifdef VKGRAD_WITH_ONNX
#include "vkgrad/onnx/importer.h"
#endif
#include "vkgrad/vae/checkpoint.h"
#include "vkgrad/vit/checkpoint.h"

namespace vkgrad::fuzz {
namespace {

namespace fs = std::filesystem;

// A folder of this process's own for the files the readers open (TMPDIR may put it on
// tmpfs), removed at exit.
const fs::path& scratch() {
  struct Scratch {
    fs::path dir = fs::temp_directory_path() / ("vkgrad-fuzz-" + std::to_string(test::processId()));
    Scratch() { fs::create_directories(dir); }
    ~Scratch() {
      std::error_code ec;
      fs::remove_all(dir, ec);
    }
  };
  static const Scratch scratch;
  return scratch.dir;
}

fs::path writeScratch(const std::string& name, std::string_view bytes) {
  const fs::path path = scratch() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("fuzz: cannot write " + path.string());
  return path;
}

void safetensors(std::string_view bytes) {
  graph::loadSafetensors(writeScratch("model.safetensors", bytes));
}

// The config readers take a checkpoint directory and read DIR/config.json from it.
template <typename Read>
void config(std::string_view bytes, Read read) {
  writeScratch("config.json", bytes);
  read(scratch());
}
void gptConfig(std::string_view bytes) {
  config(bytes, gpt::readConfig);
}
void vitConfig(std::string_view bytes) {
  config(bytes, vit::readConfig);
}
void vaeConfig(std::string_view bytes) {
  config(bytes, vae::readConfig);
}

void idxImages(std::string_view bytes) {
  data::readIdxImages(writeScratch("images-idx3-ubyte", bytes).string());
}
void idxLabels(std::string_view bytes) {
  data::readIdxLabels(writeScratch("labels-idx1-ubyte", bytes).string(), 10);
}

// The first byte picks directed or not; the rest is the text.
void edgeList(std::string_view bytes) {
  if (bytes.empty()) return;
  gnn::parseEdgeList(std::string(bytes.substr(1)), "fuzz", (bytes[0] & 1) != 0);
}

void vocab(std::string_view bytes) {
  gpt::ByteVocab::fromJson(graph::parseJson(bytes, "vocab"));
}

// The arguments, separated by NUL bytes, for a parser declared like vkgrad-gpt train's, whose
// values are then read as the app reads them. --help and usage errors are its answers.
void cli(std::string_view bytes) {
  std::vector<std::string> args{"vkgrad-fuzz"};
  size_t begin = 0;
  while (begin <= bytes.size()) {
    const size_t end = std::min(bytes.find('\0', begin), bytes.size());
    args.emplace_back(bytes.substr(begin, end - begin));
    begin = end + 1;
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  apps::Cli c("vkgrad-fuzz", "the command-line parser under fuzzing");
  c.positional("command", "a command");
  c.option("data", "a file");
  c.option("steps", "a count", "600");
  c.option("lr", "a rate", "3e-3");
  c.flag("tie", "a flag");
  try {
    c.parse(int(argv.size()), argv.data());
    (void)c.getInt("steps", 1, int64_t(1) << 40);
    (void)c.getDouble("lr", 1e-8, 10.0);
    (void)c.has("tie");
    (void)c.get("data");
  } catch (const apps::HelpRequested&) {
  }
}

// The .npy reader (vkgrad-onnx's inputs and targets).
void npy(std::string_view bytes) {
  graph::parseNpy(std::vector<uint8_t>(bytes.begin(), bytes.end()), "fuzz.npy");
}

// A Hugging Face model folder (hf/config.h, hf/weights.h, hf/model.h). The bytes hold its
// files, each "<name>\n<contents>", separated by kFileSeparator; a part whose name is not a
// plain file name is left out. config.json and the weights (one model.safetensors, or
// model.safetensors.index.json and the shards it names) are read each on its own, so that a
// bad config still leaves the weights' reader fuzzed, then mapped onto the GPT (host only).
constexpr std::string_view kFileSeparator = "\n--file--\n";

bool plainFileName(std::string_view name) {
  if (name.empty() || name.size() > 100 || name == "." || name == "..") return false;
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == '/' || c == '\\' || c == ':') return false;
  return true;
}

void hfFolder(std::string_view bytes) {
  const fs::path dir = scratch() / "hf";
  fs::remove_all(dir);  // the last input's files
  fs::create_directories(dir);
  for (size_t begin = 0; begin <= bytes.size();) {
    const size_t end = std::min(bytes.find(kFileSeparator, begin), bytes.size());
    const std::string_view part = bytes.substr(begin, end - begin);
    const size_t eol = std::min(part.find('\n'), part.size());
    const std::string_view name = part.substr(0, eol);
    if (plainFileName(name))
      writeScratch("hf/" + std::string(name), part.substr(eol + (eol < part.size())));
    begin = end + kFileSeparator.size();
  }
  (void)hf::isHfFolder(dir);
  try {
    (void)hf::readHfConfig(dir);
  } catch (const Error&) {
  }
  try {
    (void)hf::readHfWeights(dir);
  } catch (const Error&) {
  }
  (void)hf::readHfModel(dir);
}

#ifdef VKGRAD_WITH_TOKENIZERS
// tokenizer.json's reader; a tokenizer it accepts then encodes and decodes a text with every
// kind of byte (whether that round-trips depends on the vocabulary, so it is not checked here).
void tokenizerJson(std::string_view bytes) {
  const tokenizers::Tokenizer t = tokenizers::parseTokenizerJson(bytes, "fuzz/tokenizer.json");
  const std::string text = "Hello, world! It's 2024: naïve 東京 \xff\xc3 <|endoftext|>\n\n  x";
  (void)t.decode(t.encode(text));
  (void)t.decode(t.encode(text, false), true);
}

// Encoding and decoding any bytes (the first picks whether special tokens are matched) with a
// tokenizer of GPT-2's kind and one of Llama 2's: the round trip must give the bytes back
// exactly.
void tokenizerEncode(std::string_view bytes) {
  static const tokenizers::Tokenizer t = [] {
    // Merges learnt from a few lines: enough that words become several-byte tokens.
    std::string text;
    for (int i = 0; i < 20; ++i)
      text += "The quick brown fox jumps over the lazy dog; it's 1234 naïve cafés in 東京.\n";
    tokenizers::BpeSpec spec = tokenizers::trainBpe(text, 60).spec();
    const uint32_t eot = uint32_t(spec.vocab.size());
    return tokenizers::Tokenizer(spec, tokenizers::PreTokenizer::gpt2(),
                                 {{"<|endoftext|>", eot, true}, {"<pad>", eot + 1, false}},
                                 "the fuzz target's tokenizer");
  }();
  // One of Llama 2's kind: merges over characters, byte fallback, '▁' for spaces.
  static const tokenizers::Tokenizer pieces = [] {
    tokenizers::BpeSpec spec;
    spec.alphabet = tokenizers::BpeAlphabet::Characters;
    spec.byte_fallback = true;
    spec.unk_token = "<unk>";
    spec.vocab = {{"<unk>", 0}};
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      spec.vocab.emplace_back(name, uint32_t(1 + b));
    }
    for (const char* piece : {"▁", "t", "h", "e", "é", "▁t", "he", "▁the"})
      spec.vocab.emplace_back(piece, uint32_t(spec.vocab.size()));
    spec.merges = {{"▁", "t"}, {"h", "e"}, {"▁t", "he"}};
    tokenizers::Tokenizer t(spec, {}, {{"<s>", 300, true}}, "the fuzz target's pieces");
    t.setSentencePiece({{tokenizers::Prepend::Every, false}, {true, true, 1}});
    return t;
  }();
  if (bytes.empty()) return;
  const std::string_view text = bytes.substr(1);
  if (t.decode(t.encode(text, (bytes[0] & 1) != 0)) != text)
    throw std::logic_error("tokenizer round trip lost bytes");
  // Its round trip holds for text with no '▁' of its own (decoded as a space) and added tokens
  // taken as text (the normalizer puts a '▁' after each, which decoding keeps).
  if (text.find(tokenizers::kMetaspace) == std::string_view::npos &&
      pieces.decode(pieces.encode(text, false)) != text)
    throw std::logic_error("SentencePiece-style tokenizer round trip lost bytes");
}
#endif

#ifdef VKGRAD_WITH_ONNX
// The .onnx reader and the importer's host pass (shape inference and folding; no device).
void onnxModel(std::string_view bytes) {
  const onnx::Model model = onnx::Model::parse(bytes, "fuzz.onnx", scratch());
  (void)onnx::deviceInitializers(model, {});
}
#endif

constexpr Target kTargets[] = {
    {"safetensors", safetensors},
    {"gpt_config", gptConfig},
    {"vit_config", vitConfig},
    {"vae_config", vaeConfig},
    {"idx_images", idxImages},
    {"idx_labels", idxLabels},
    {"edge_list", edgeList},
    {"vocab", vocab},
    {"cli", cli},
    {"npy", npy},
    {"hf_folder", hfFolder},
#ifdef VKGRAD_WITH_TOKENIZERS
    {"tokenizer_json", tokenizerJson},
    {"tokenizer_encode", tokenizerEncode},
#endif
#ifdef VKGRAD_WITH_ONNX
    {"onnx", onnxModel},
#endif
};

}  // namespace

std::span<const Target> targets() {
  return kTargets;
}

const Target* findTarget(std::string_view name) {
  for (const Target& t : kTargets)
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace vkgrad::fuzz
