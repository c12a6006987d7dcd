// vkgrad-tokenize: a Hugging Face model folder's tokenizer (tokenizer.json, or GPT-2's
// vocab.json and merges.txt) on the command line: encode text to ids, decode ids to text,
// train a small byte-level BPE vocabulary on a text, and time encoding (bench.cpp).
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "bench.h"
#include "common/app_main.h"
#include "common/cli.h"
#include "corpus.h"
#include "vkgrad/io/atomic_file.h"
#include "vkgrad/io/input_file.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/tokenizers/bpe_trainer.h"
#include "vkgrad/tokenizers/tokenizer.h"
#include "vkgrad/tokenizers/tokenizer_writer.h"

namespace vkgrad::apps {
namespace {

namespace fs = std::filesystem;
using graph::Json;

int encode(int argc, char** argv) {
  Cli cli("vkgrad-tokenize encode",
          "Prints the token ids of a text (--text, or the bytes of --file) as the folder's\n"
          "tokenizer encodes it, separated by spaces.");
  cli.positional("encode", "the command");
  cli.positional("DIR", "a model folder with tokenizer.json, or vocab.json and merges.txt");
  cli.option("text", "the text to encode");
  cli.option("file", "a file whose bytes to encode");
  cli.flag("no-special", "encode special tokens written in the text as plain text");
  cli.flag("json", "print {\"ids\": [...], \"tokens\": N, \"bytes\": N}");
  cli.parse(argc, argv);
  if (cli.positionals().size() < 2) cli.fail("name the model folder: DIR");
  if (cli.given("text") == cli.given("file")) cli.fail("give one of --text and --file");
  const std::string text = cli.given("text")
                               ? cli.get("text")
                               : graph::readInputFile(cli.get("file"), "a text file", 1u << 30);
  const tokenizers::Tokenizer t = tokenizers::loadTokenizer(cli.positionals()[1]);
  const std::vector<uint32_t> ids = t.encode(text, !cli.has("no-special"));
  if (cli.has("json")) {
    std::printf("%s\n",
                graph::dumpJson(Json{{"ids", ids}, {"tokens", ids.size()}, {"bytes", text.size()}})
                    .c_str());
  } else {
    std::string line;
    for (const uint32_t id : ids) line += (line.empty() ? "" : " ") + std::to_string(id);
    std::printf("%s\n", line.c_str());
  }
  return 0;
}

int decode(int argc, char** argv) {
  Cli cli("vkgrad-tokenize decode",
          "Writes the bytes the ids stand for to stdout, exactly (not UTF-8 when the ids\n"
          "split a character).");
  cli.positional("decode", "the command");
  cli.positional("DIR", "a model folder with tokenizer.json, or vocab.json and merges.txt");
  cli.positional("ID...", "token ids");
  cli.flag("skip-special", "leave special tokens out");
  cli.parse(argc, argv);
  if (cli.positionals().size() < 2) cli.fail("name the model folder: DIR");
  std::vector<uint32_t> ids;
  for (size_t i = 2; i < cli.positionals().size(); ++i) {
    const std::string& s = cli.positionals()[i];
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
      cli.fail("a token id must be a number, got '" + s + "'");
    ids.push_back(uint32_t(std::stoul(s)));
  }
  const tokenizers::Tokenizer t = tokenizers::loadTokenizer(cli.positionals()[1]);
  const std::string bytes = t.decode(ids, cli.has("skip-special"));
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  return 0;
}

int train(int argc, char** argv) {
  Cli cli("vkgrad-tokenize train",
          "Trains a byte-level BPE vocabulary with GPT-2's pre-tokenizer on a text and writes\n"
          "it as OUT/tokenizer.json, OUT/vocab.json and OUT/merges.txt, with <|endoftext|>\n"
          "as the last id. Without --data, Debian's licences (/usr/share/common-licenses).");
  cli.positional("train", "the command");
  cli.repeated("data", "a file or folder to train on (repeatable)");
  cli.option("merges", "merges to learn", "4000");
  cli.option("out", "the folder to write");
  cli.parse(argc, argv);
  if (!cli.given("out")) cli.fail("name the folder to write: --out DIR");
  const auto merges = size_t(cli.getInt("merges", 1, 1000000));
  const std::string text =
      readCorpus(cli.given("data") ? cli.getAll("data") : defaultTrainingPaths(), 1u << 30);
  tokenizers::BpeSpec spec = tokenizers::trainBpe(text, merges).spec();
  const auto eot = uint32_t(spec.vocab.size());
  spec.vocab.emplace_back("<|endoftext|>", eot);
  const std::vector<tokenizers::AddedToken> added{{"<|endoftext|>", eot, true}};
  const fs::path out = cli.get("out");
  fs::create_directories(out);
  graph::writeFileAtomically(out / "tokenizer.json",
                             graph::dumpJson(tokenizers::tokenizerJson(spec, added), 2) + "\n");
  graph::writeFileAtomically(out / "vocab.json", tokenizers::vocabJson(spec) + "\n");
  graph::writeFileAtomically(out / "merges.txt", tokenizers::mergesTxt(spec));
  std::fprintf(stderr, "vkgrad-tokenize: %zu merges, %zu tokens, written to %s\n",
               spec.merges.size(), spec.vocab.size(), out.string().c_str());
  return 0;
}

const char* const kUsage =
    "usage: vkgrad-tokenize encode DIR --text TEXT | --file FILE [--json]\n"
    "       vkgrad-tokenize decode DIR ID...\n"
    "       vkgrad-tokenize train --out DIR [--data FILE]... [--merges N]\n"
    "       vkgrad-tokenize bench [--train FILE]... [--data FILE]... [--merges N]\n"
    "`vkgrad-tokenize COMMAND --help` lists a command's options.\n";

}  // namespace
}  // namespace vkgrad::apps

int main(int argc, char** argv) {
  using namespace vkgrad::apps;
  return commandMain(
      "vkgrad-tokenize",
      "vkgrad-tokenize: BPE tokenizers (byte-level or SentencePiece-style) from Hugging Face "
      "model folders.",
      kUsage, {{"encode", encode}, {"decode", decode}, {"train", train}, {"bench", bench}}, argc,
      argv);
}
