#include "vkgrad/nn/lora.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <set>

#include "vkgrad/core/error.h"

namespace vkgrad::nn {

using graph::SavedTensor;

namespace {

constexpr const char* kA = ".lora_a";
constexpr const char* kB = ".lora_b";

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// For an adapter tensor's name "<prefix><tag>" or "<prefix><tag>.<column>" (tag kA or kB):
// the prefix and the block's column (kWholeProduct without one); false for another name.
bool parseLoraName(const std::string& name, const char* tag, std::string* prefix, int64_t* block) {
  const size_t at = name.rfind(tag);
  if (at == std::string::npos || at == 0) return false;
  const std::string rest = name.substr(at + strlen(tag));
  if (rest.empty()) {
    *block = kWholeProduct;
  } else {
    if (rest.size() < 2 || rest.size() > 19 || rest[0] != '.' ||
        !std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    *block = std::stoll(rest.substr(1));
  }
  *prefix = name.substr(0, at);
  return true;
}

float wordToFloat(uint32_t w) {
  float f;
  std::memcpy(&f, &w, 4);
  return f;
}
uint32_t floatToWord(float f) {
  uint32_t w;
  std::memcpy(&w, &f, 4);
  return w;
}

SavedTensor f32Tensor(const std::string& name, std::vector<int64_t> shape,
                      const std::vector<float>& values) {
  SavedTensor t{name, ops::DType::F32, std::move(shape), {}};
  for (const float v : values) t.data.push_back(floatToWord(v));
  return t;
}

}  // namespace

std::string loraA(const std::string& prefix, int64_t block) {
  return prefix + kA + (block == kWholeProduct ? "" : "." + std::to_string(block));
}
std::string loraB(const std::string& prefix, int64_t block) {
  return prefix + kB + (block == kWholeProduct ? "" : "." + std::to_string(block));
}
std::string loraScale(const std::string& prefix) {
  return prefix + ".lora_scale";
}

bool isLoraName(const std::string& name) {
  std::string prefix;
  int64_t block;
  return endsWith(name, ".lora_scale") || parseLoraName(name, kA, &prefix, &block) ||
         parseLoraName(name, kB, &prefix, &block);
}

void declareLora(graph::ParameterStore& store, const std::string& prefix, const LoraConfig& config,
                 int64_t begin, int64_t end) {
  const graph::Parameter* w = store.find(prefix + ".w");
  if (!w || w->shape.rank() != 2)
    throw Error("LoRA on \"" + prefix + "\": the store has no (in, out) weight " + prefix + ".w");
  const int64_t in = w->shape[0];
  const bool whole = begin == kWholeProduct;
  const std::string what =
      "LoRA on \"" + prefix + "\"" +
      (whole ? "" : " columns [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
  if (!whole && (begin < 0 || end <= begin || end > w->shape[1]))
    throw Error(what + ": not a block of the product's " + std::to_string(w->shape[1]) +
                " columns");
  const int64_t out = whole ? w->shape[1] : end - begin;
  if (config.rank < 1 || config.rank > std::min(in, out))
    throw Error(what + " (" + std::to_string(in) + ", " + std::to_string(out) + "): rank " +
                std::to_string(config.rank) +
                " must be in [1, min(in, out) = " + std::to_string(std::min(in, out)) + "]");
  if (!(config.alpha > 0.0f) || !std::isfinite(config.alpha))
    throw Error(what + ": alpha " + std::to_string(config.alpha) + " must be finite and positive");
  for (const LoraBlock& other : loraBlocks(store, prefix))
    if (whole || (begin < other.end && other.begin < end))  // a new whole one overlaps any
      throw Error(what + ": overlaps the adapter declared there (columns [" +
                  std::to_string(other.begin) + ", " + std::to_string(other.end) + "))");
  if (const graph::Parameter* s = store.find(loraScale(prefix)); s && s->init.a != config.scale())
    throw Error(what + ": scale " + std::to_string(config.scale()) + " unlike its other blocks' " +
                std::to_string(s->init.a));
  const float bound = 1.0f / std::sqrt(float(in));
  store.add(loraA(prefix, begin), {in, config.rank}, graph::Init::uniform(-bound, bound));
  store.add(loraB(prefix, begin), {config.rank, out}, graph::Init::zeros());
  if (!store.find(loraScale(prefix))) {
    store.add(loraScale(prefix), {1}, graph::Init::constant(config.scale()));
    store.setFrozen(loraScale(prefix), true);
  }
}

bool hasLora(const graph::ParameterStore& store, const std::string& prefix) {
  // The scale comes with the product's first adapter: one look-up, not a scan.
  return store.find(loraScale(prefix)) != nullptr;
}

std::vector<std::string> loraPrefixes(const graph::ParameterStore& store) {
  std::vector<std::string> out;
  for (const auto& p : store.all())
    if (endsWith(p->name, ".lora_scale"))
      out.push_back(p->name.substr(0, p->name.size() - strlen(".lora_scale")));
  return out;
}

std::vector<LoraBlock> loraBlocks(const graph::ParameterStore& store, const std::string& prefix) {
  std::vector<LoraBlock> out;
  if (!hasLora(store, prefix)) return out;
  for (const auto& p : store.all()) {
    std::string at;
    int64_t block;
    if (p->name.compare(0, prefix.size(), prefix) != 0 ||
        !parseLoraName(p->name, kA, &at, &block) || at != prefix)
      continue;
    const graph::Parameter& b = store.at(loraB(prefix, block));
    const int64_t begin = block == kWholeProduct ? 0 : block;
    out.push_back({begin, begin + b.shape[1], p->name, b.name});
  }
  std::sort(out.begin(), out.end(),
            [](const LoraBlock& x, const LoraBlock& y) { return x.begin < y.begin; });
  return out;
}

graph::Tensor addLora(graph::Graph& g, const graph::ParameterStore& store,
                      const std::string& prefix, graph::Tensor x, graph::Tensor y) {
  const std::vector<LoraBlock> blocks = loraBlocks(store, prefix);
  if (blocks.empty()) return y;
  const ops::Shape xs = g.shape(x), ys = g.shape(y);
  for (const LoraBlock& b : blocks) {
    const graph::Parameter& a = store.at(b.a);
    if (xs.rank() != ys.rank() || xs.back() != a.shape[0] || b.end > ys.back() ||
        xs.rows() != ys.rows())
      throw ShapeError(g.describe("addLora", {x, y}) + ": the adapter of \"" + prefix + "\" is " +
                       a.shape.str() + " x " + store.at(b.b).shape.str() + " on columns [" +
                       std::to_string(b.begin) + ", " + std::to_string(b.end) + ")");
  }
  // y's pieces at the blocks' edges, each with its block or none (-1).
  std::vector<int64_t> sizes;
  std::vector<int> owner;
  int64_t column = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].begin > column) {
      sizes.push_back(blocks[i].begin - column);
      owner.push_back(-1);
    }
    sizes.push_back(blocks[i].end - blocks[i].begin);
    owner.push_back(int(i));
    column = blocks[i].end;
  }
  if (column < ys.back()) {
    sizes.push_back(ys.back() - column);
    owner.push_back(-1);
  }
  // One piece (a whole adapter): y itself, no copy.
  std::vector<graph::Tensor> pieces = sizes.size() == 1 ? std::vector{y} : g.split(y, -1, sizes);
  const graph::Tensor scale = g.parameter(store.at(loraScale(prefix)));
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (owner[i] < 0) continue;
    const LoraBlock& b = blocks[size_t(owner[i])];
    // scale · (x·A) on the (rows, r) product, the smallest of the three.
    const graph::Tensor xa = g.mul(g.matmul(x, g.parameter(store.at(b.a))), scale);
    pieces[i] = g.matmulAdd(xa, g.parameter(store.at(b.b)), {}, pieces[i]);
  }
  return pieces.size() == 1 ? pieces[0] : g.concat(pieces, -1);
}

std::vector<SavedTensor> loraInitialValues(const graph::ParameterStore& store, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<SavedTensor> out;
  for (const auto& p : store.all()) {  // every A in declaration order: one stream
    std::string prefix;
    int64_t block;
    if (!parseLoraName(p->name, kA, &prefix, &block)) continue;
    const graph::Parameter& a = *p;
    const graph::Parameter& b = store.at(loraB(prefix, block));
    const float bound = a.init.b;  // declareLora's U(-bound, bound)
    std::vector<float> values(size_t(a.shape.numel()));
    // The top 24 bits of each draw: a uniform in [0, 1) exact in f32.
    for (float& v : values) v = bound * (2.0f * float(double(rng() >> 40) * 0x1.0p-24) - 1.0f);
    out.push_back(f32Tensor(a.name, {a.shape[0], a.shape[1]}, values));
    out.push_back(f32Tensor(b.name, {b.shape[0], b.shape[1]},
                            std::vector<float>(size_t(b.shape.numel()), 0.0f)));
  }
  for (const std::string& prefix : loraPrefixes(store))
    out.push_back(f32Tensor(loraScale(prefix), {1}, {store.at(loraScale(prefix)).init.a}));
  return out;
}

std::vector<SavedTensor> mergeLora(const std::vector<SavedTensor>& parameters) {
  std::map<std::string, SavedTensor> f32;  // every tensor as f32, by name
  for (const SavedTensor& t : parameters) f32[t.name] = convertSaved(t, ops::DType::F32);
  auto value = [](const SavedTensor& t, size_t i) { return double(wordToFloat(t.data[i])); };
  std::set<std::string> merged;  // the weights an adapter changed
  for (const auto& [name, a] : f32) {
    std::string prefix;
    int64_t block;
    if (!parseLoraName(name, kA, &prefix, &block)) continue;
    const auto w = f32.find(prefix + ".w"), b = f32.find(loraB(prefix, block)),
               s = f32.find(loraScale(prefix));
    const bool fits = w != f32.end() && b != f32.end() && s != f32.end() &&
                      w->second.shape.size() == 2 && a.shape.size() == 2 &&
                      b->second.shape.size() == 2 && w->second.shape[0] == a.shape[0] &&
                      a.shape[1] == b->second.shape[0];
    // The block's columns [begin, begin + cols) of W; a whole adapter has all of them.
    const int64_t begin = block == kWholeProduct ? 0 : block;
    if (!fits || (block == kWholeProduct ? b->second.shape[1] != w->second.shape[1]
                                         : begin + b->second.shape[1] > w->second.shape[1]))
      throw Error("mergeLora: the adapter \"" + name + "\" has no matching weight, B or scale (A " +
                  graph::dimsText(a.shape) + ")");
    SavedTensor& wt = w->second;
    const size_t in = size_t(a.shape[0]), r = size_t(a.shape[1]), out = size_t(wt.shape[1]),
                 cols = size_t(b->second.shape[1]), first = size_t(begin);
    const double scale = value(s->second, 0);
    for (size_t i = 0; i < in; ++i)
      for (size_t j = 0; j < cols; ++j) {
        double delta = 0;
        for (size_t k = 0; k < r; ++k)
          delta += value(a, i * r + k) * value(b->second, k * cols + j);
        const size_t at = i * out + first + j;
        wt.data[at] = floatToWord(float(value(wt, at) + scale * delta));
      }
    merged.insert(wt.name);
  }
  std::vector<SavedTensor> out;
  for (const SavedTensor& t : parameters) {
    if (isLoraName(t.name)) continue;
    out.push_back(merged.count(t.name) ? f32.at(t.name) : t);
  }
  return out;
}

}  // namespace vkgrad::nn
