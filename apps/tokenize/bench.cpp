// Trains a vocabulary here (Debian's licences by default), writes it as tokenizer.json and
// reads it back, then encodes a text (every package's copyright file by default) on one
// thread: each round with a fresh tokenizer, so its word cache starts empty ("cold", the
// figure to quote), then again with the cache filled ("warm"), then decodes. Reports MB/s
// (1e6 bytes of input per second), medians over the rounds, and the tokens per byte.
//
// With --sentencepiece the trained vocabulary is rewritten as Llama 2's kind of tokenizer.json
// (sentencepiece_json.h): each token that is whole UTF-8 becomes a piece with ' ' written '▁'
// (" the" is "▁the"), the merges between such pieces are kept in their order, every byte gets
// a "<0xXX>" token; tokens with a '▁' after another character ("\n▁▁") and the merges that
// make them are left out, as SentencePiece's vocabularies have none, so the unsplit text (Llama 2's
// files have no pre-tokenizer) is encoded word by word through the cache all the same.
#include "bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "common/cli.h"
#include "corpus.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/tokenizers/bpe_trainer.h"
#include "vkgrad/tokenizers/byte_level.h"
#include "vkgrad/tokenizers/metaspace.h"
#include "vkgrad/tokenizers/tokenizer_json.h"
#include "vkgrad/tokenizers/tokenizer_writer.h"

namespace vkgrad::apps {
namespace {

using Clock = std::chrono::steady_clock;
using graph::Json;

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Seconds per round of loading the tokenizer, encoding with an empty word cache, encoding
// again with it filled, and decoding; each round checks the round trip.
struct Rounds {
  std::vector<double> load_s, cold_s, warm_s, decode_s;
  size_t tokens = 0;
};

Rounds timeRounds(const std::string& file, const std::string& text, int rounds) {
  Rounds out;
  for (int r = 0; r < rounds; ++r) {
    auto start = Clock::now();
    const tokenizers::Tokenizer t = tokenizers::parseTokenizerJson(file, "bench tokenizer.json");
    out.load_s.push_back(seconds(start));
    start = Clock::now();
    const std::vector<uint32_t> ids = t.encode(text);
    out.cold_s.push_back(seconds(start));
    start = Clock::now();
    const std::vector<uint32_t> again = t.encode(text);
    out.warm_s.push_back(seconds(start));
    start = Clock::now();
    const std::string back = t.decode(ids);
    out.decode_s.push_back(seconds(start));
    if (back != text || again != ids) throw Error("vkgrad-tokenize bench: the round trip failed");
    out.tokens = ids.size();
  }
  return out;
}

// bytes as a SentencePiece piece: ' ' written '▁'; nullopt unless bytes is whole UTF-8.
std::optional<std::string> piece(const std::string& bytes) {
  size_t pos = 0;
  while (pos < bytes.size())
    if (!tokenizers::nextCodePoint(bytes, pos)) return std::nullopt;
  std::string out;
  for (const char c : bytes)
    if (c == ' ')
      out += tokenizers::kMetaspace;
    else
      out.push_back(c);
  return out;
}

// The byte-level vocabulary spec rewritten as Llama 2's tokenizer.json (see the top).
Json sentencePieceJson(const tokenizers::BpeSpec& bytes) {
  tokenizers::BpeSpec spec;
  spec.alphabet = tokenizers::BpeAlphabet::Characters;
  spec.byte_fallback = spec.fuse_unk = true;
  spec.unk_token = "<unk>";
  std::unordered_set<std::string> known;
  const auto add = [&](const std::string& text) {
    if (known.insert(text).second) spec.vocab.emplace_back(text, uint32_t(spec.vocab.size()));
  };
  add("<unk>"), add("<s>"), add("</s>");
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    add(name);
  }
  for (const auto& [text, id] : bytes.vocab)
    if (const auto p = piece(tokenizers::fromByteLevel(text).value_or(""));
        p && !p->empty() && tokenizers::spacesLeadOnly(*p))
      add(*p);
  for (const auto& [left, right] : bytes.merges) {
    const auto l = piece(*tokenizers::fromByteLevel(left));
    const auto r = piece(*tokenizers::fromByteLevel(right));
    // SentencePiece's own vocabularies have no '▁' after another character ("\n▁▁").
    if (l && r && !l->empty() && !r->empty() && tokenizers::spacesLeadOnly(*l + *r))
      add(*l + *r), spec.merges.emplace_back(*l, *r);
  }
  const std::vector<tokenizers::AddedToken> added{
      {"<unk>", 0, true}, {"<s>", 1, true}, {"</s>", 2, true}};
  return tokenizers::tokenizerJson(spec, added);
}

}  // namespace

int bench(int argc, char** argv) {
  Cli cli("vkgrad-tokenize bench",
          "Trains a byte-level BPE vocabulary and times encoding a text with it on one thread\n"
          "(see apps/tokenize/bench.cpp for the method). Without --train, Debian's licences\n"
          "(/usr/share/common-licenses); without --data, /usr/share/doc/*/copyright.");
  cli.positional("bench", "the command");
  cli.repeated("train", "a file or folder to train the vocabulary on (repeatable)");
  cli.repeated("data", "a file or folder to encode (repeatable)");
  cli.option("merges", "merges to train", "4000");
  cli.option("bytes", "at most this many bytes of --data", "16000000");
  cli.option("rounds", "timed rounds; medians are reported", "3");
  cli.flag("sentencepiece",
           "rewrite the vocabulary as Llama 2's SentencePiece-style tokenizer.json and time that");
  cli.flag("json", "one JSON object on stdout");
  cli.parse(argc, argv);
  const bool sentence_piece = cli.has("sentencepiece");
  const auto merges = size_t(cli.getInt("merges", 1, 1000000));
  const auto bytes = size_t(cli.getInt("bytes", 1, int64_t(1) << 32));
  const int rounds = int(cli.getInt("rounds", 1, 1000));
  const std::vector<std::string> train_paths =
      cli.given("train") ? cli.getAll("train") : defaultTrainingPaths();
  const std::vector<std::string> data_paths =
      cli.given("data") ? cli.getAll("data") : defaultEncodingPaths();

  const std::string training = readCorpus(train_paths, size_t(1) << 30);
  const auto start = Clock::now();
  const tokenizers::TrainedBpe trained = tokenizers::trainBpe(training, merges);
  const double train_s = seconds(start);
  tokenizers::BpeSpec spec = trained.spec();
  const auto eot = uint32_t(spec.vocab.size());
  spec.vocab.emplace_back("<|endoftext|>", eot);
  const std::vector<tokenizers::AddedToken> added{{"<|endoftext|>", eot, true}};
  const std::string file = graph::dumpJson(sentence_piece ? sentencePieceJson(spec)
                                                          : tokenizers::tokenizerJson(spec, added));
  std::string text = readCorpus(data_paths, bytes);
  // A '▁' of the text's own would decode as a space: the round trip is checked without them.
  for (size_t at = text.find(tokenizers::kMetaspace); sentence_piece && at != std::string::npos;
       at = text.find(tokenizers::kMetaspace, at))
    text.replace(at, tokenizers::kMetaspace.size(), "_");
  std::fprintf(stderr,
               "vkgrad-tokenize: %zu merges trained on %zu bytes in %.2f s (vocabulary %zu); "
               "encoding %zu bytes, %d rounds\n",
               trained.merges.size(), training.size(), train_s, spec.vocab.size(), text.size(),
               rounds);

  const Rounds timed = timeRounds(file, text, rounds);
  const double mb = double(text.size()) / 1e6;
  Json result = {
      {"bench", "tokenize"},
      {"kind", sentence_piece ? "sentencepiece" : "byte-level"},
      {"vocabulary", spec.vocab.size()},
      {"merges", trained.merges.size()},
      {"training_bytes", training.size()},
      {"train_s", train_s},
      {"bytes", text.size()},
      {"tokens", timed.tokens},
      {"bytes_per_token", double(text.size()) / double(std::max<size_t>(timed.tokens, 1))},
      {"load_ms", 1e3 * median(timed.load_s)},
      {"encode_cold_mb_s", mb / median(timed.cold_s)},
      {"encode_warm_mb_s", mb / median(timed.warm_s)},
      {"decode_mb_s", mb / median(timed.decode_s)}};
  if (cli.has("json")) {
    std::printf("%s\n", graph::dumpJson(result).c_str());
  } else {
    std::printf(
        "vocabulary %zu tokens (%zu merges); %zu bytes -> %zu tokens (%.2f bytes/token)\n"
        "load %.1f ms; encode %.2f MB/s with an empty cache, %.2f MB/s warm; decode %.1f "
        "MB/s\n",
        spec.vocab.size(), trained.merges.size(), text.size(), timed.tokens,
        result["bytes_per_token"].get<double>(), result["load_ms"].get<double>(),
        result["encode_cold_mb_s"].get<double>(), result["encode_warm_mb_s"].get<double>(),
        result["decode_mb_s"].get<double>());
  }
  return 0;
}

}  // namespace vkgrad::apps
