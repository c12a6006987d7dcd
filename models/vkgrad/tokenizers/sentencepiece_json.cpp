#include "vkgrad/tokenizers/sentencepiece_json.h"

#include <algorithm>
#include <optional>
#include <string>

namespace vkgrad::tokenizers {
namespace {

// A Replace step's pattern ({"String": "▁"}) and content, or unsupported when they are not
// `from` and `to`.
bool replaces(const Reader& r, const Json& step, const std::string& path, const char* from,
              const char* to) {
  const Json* pattern = r.member(step, path, "pattern");
  const Json* literal = pattern ? r.member(*pattern, path + ".pattern", "String") : nullptr;
  const Json* content = r.member(step, path, "content");
  return literal && content && *literal == from && *content == to;
}

// Metaspace's "replacement" must be '▁'; its prepend scheme, or in older files the flag
// add_prefix_space (true: always).
Prepend readScheme(const Reader& r, const Json& config, const std::string& path) {
  const Json* replacement = r.member(config, path, "replacement");
  if (replacement && *replacement != std::string(kMetaspace))
    r.unsupported(path + ".replacement", replacement->dump() + " (only \"▁\")");
  const Json* scheme = r.member(config, path, "prepend_scheme");
  if (!scheme || scheme->is_null())
    return r.flag(config, path, "add_prefix_space", true) ? Prepend::Always : Prepend::Never;
  const std::string name = r.string(*scheme, path + ".prepend_scheme");
  if (name == "first") return Prepend::First;
  if (name == "always") return Prepend::Always;
  if (name == "never") return Prepend::Never;
  r.unsupported(path + ".prepend_scheme", "\"" + name + "\"");
}

// The Prepend and Replace normalizers, or nullopt for none.
std::optional<Metaspace> readNormalizer(const Reader& r, const Json* normalizer) {
  const std::string type = r.type(normalizer, "normalizer");
  if (type == "none") return std::nullopt;
  std::string path = "normalizer";
  const Json* list = normalizer;
  bool sequence = type == "Sequence";
  if (sequence) {
    list = r.member(*normalizer, path, "normalizers");
    if (!list || !list->is_array()) r.fail(path + ".normalizers", "must be an array");
  }
  bool prepend = false, replace = false;
  for (size_t i = 0; i < (sequence ? list->size() : 1); ++i) {
    const Json& step = sequence ? (*list)[i] : *normalizer;
    const std::string at = sequence ? path + ".normalizers[" + std::to_string(i) + "]" : path;
    const std::string kind = r.type(&step, at);
    if (kind == "Prepend") {
      const Json* text = r.member(step, at, "prepend");
      if (!text || *text != std::string(kMetaspace))
        r.unsupported(at, "Prepend of " + (text ? text->dump() : "nothing") + " (only \"▁\")");
      prepend = true;
    } else if (kind == "Replace") {
      if (!replaces(r, step, at, " ", std::string(kMetaspace).c_str()))
        r.unsupported(at, "a Replace other than \" \" by \"▁\" (" + step.dump() + ")");
      replace = true;
    } else {
      r.unsupported(at, "normalizer " + kind + " (only Prepend \"▁\" and Replace \" \" by \"▁\")");
    }
  }
  if (!replace) r.unsupported(path, "Prepend \"▁\" without Replace \" \" by \"▁\"");
  return Metaspace{prepend ? Prepend::Every : Prepend::Never, false};
}

// The Metaspace pre-tokenizer, or nullopt for none.
std::optional<Metaspace> readPreTokenizer(const Reader& r, const Json* config) {
  const std::string type = r.type(config, "pre_tokenizer");
  if (type == "none") return std::nullopt;
  if (type != "Metaspace")
    r.unsupported("pre_tokenizer", "type " + type + " with a SentencePiece-style decoder");
  return Metaspace{readScheme(r, *config, "pre_tokenizer"),
                   r.flag(*config, "pre_tokenizer", "split", true)};
}

PieceDecoder readDecoder(const Reader& r, const Json& decoder) {
  if (r.type(&decoder, "decoder") == "Metaspace") {
    const bool prepended = readScheme(r, decoder, "decoder") != Prepend::Never;
    return PieceDecoder{true, false, prepended ? 1u : 0u};
  }
  const Json* list = r.member(decoder, "decoder", "decoders");
  if (!list || !list->is_array()) r.fail("decoder.decoders", "must be an array");
  PieceDecoder result;
  bool fused = false;
  for (size_t i = 0; i < list->size(); ++i) {
    const std::string path = "decoder.decoders[" + std::to_string(i) + "]";
    const Json& step = (*list)[i];
    const std::string type = r.type(&step, path);
    if (type == "Replace") {
      if (!replaces(r, step, path, std::string(kMetaspace).c_str(), " "))
        r.unsupported(path, "a Replace other than \"▁\" by \" \" (" + step.dump() + ")");
      result.spaces = true;
    } else if (type == "ByteFallback") {
      result.byte_fallback = true;
    } else if (type == "Fuse") {
      fused = true;
    } else if (type == "Strip") {
      const Json* content = r.member(step, path, "content");
      const Json* start = r.member(step, path, "start");
      const Json* stop = r.member(step, path, "stop");
      if (!content || *content != " " || !start || !start->is_number_unsigned() || !stop ||
          *stop != 0)
        r.unsupported(path, "a Strip other than of \" \" from the start (" + step.dump() + ")");
      // Before Fuse it would strip every token's spaces.
      if (!fused) r.unsupported(path, "Strip before Fuse");
      result.strip = uint32_t(std::min<uint64_t>(start->get<uint64_t>(), 1u << 30));
    } else {
      r.unsupported(path, "decoder " + type);
    }
  }
  return result;
}

}  // namespace

bool isSentencePiece(const Reader& r, const Json* decoder) {
  const std::string type = r.type(decoder, "decoder");
  return type == "Sequence" || type == "Metaspace";
}

SentencePiece readSentencePiece(const Reader& r, const Json& root) {
  const std::optional<Metaspace> normalizer = readNormalizer(r, r.member(root, "", "normalizer"));
  const std::optional<Metaspace> pre = readPreTokenizer(r, r.member(root, "", "pre_tokenizer"));
  if (normalizer && pre)
    r.unsupported("pre_tokenizer", "Metaspace after a normalizer that writes '▁' already");
  if (!normalizer && !pre)
    r.unsupported("pre_tokenizer",
                  "a SentencePiece-style decoder with neither a Metaspace pre-tokenizer nor a "
                  "Prepend and Replace normalizer");
  return SentencePiece{normalizer ? *normalizer : *pre,
                       readDecoder(r, *r.member(root, "", "decoder"))};
}

}  // namespace vkgrad::tokenizers
