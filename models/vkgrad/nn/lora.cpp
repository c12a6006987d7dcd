#include "vkgrad/nn/lora.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <random>

#include "vkgrad/core/error.h"

namespace vkgrad::nn {

using graph::SavedTensor;

namespace {

constexpr const char* kA = ".lora_a";

bool endsWith(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
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

std::string loraA(const std::string& prefix) {
  return prefix + kA;
}
std::string loraB(const std::string& prefix) {
  return prefix + ".lora_b";
}
std::string loraScale(const std::string& prefix) {
  return prefix + ".lora_scale";
}

void declareLora(graph::ParameterStore& store, const std::string& prefix,
                 const LoraConfig& config) {
  const graph::Parameter* w = store.find(prefix + ".w");
  if (!w || w->shape.rank() != 2)
    throw Error("LoRA on \"" + prefix + "\": the store has no (in, out) weight " + prefix + ".w");
  const int64_t in = w->shape[0], out = w->shape[1];
  if (config.rank < 1 || config.rank > std::min(in, out))
    throw Error("LoRA on \"" + prefix + "\" " + w->shape.str() + ": rank " +
                std::to_string(config.rank) +
                " must be in [1, min(in, out) = " + std::to_string(std::min(in, out)) + "]");
  if (!(config.alpha > 0.0f) || !std::isfinite(config.alpha))
    throw Error("LoRA on \"" + prefix + "\": alpha " + std::to_string(config.alpha) +
                " must be finite and positive");
  if (hasLora(store, prefix)) throw Error("LoRA on \"" + prefix + "\": declared twice");
  const float bound = 1.0f / std::sqrt(float(in));
  store.add(loraA(prefix), {in, config.rank}, graph::Init::uniform(-bound, bound));
  store.add(loraB(prefix), {config.rank, out}, graph::Init::zeros());
  store.add(loraScale(prefix), {1}, graph::Init::constant(config.scale()));
  store.setFrozen(loraScale(prefix), true);
}

bool hasLora(const graph::ParameterStore& store, const std::string& prefix) {
  return store.find(loraA(prefix)) != nullptr;
}

std::vector<std::string> loraPrefixes(const graph::ParameterStore& store) {
  std::vector<std::string> out;
  for (const auto& p : store.all())
    if (endsWith(p->name, kA)) out.push_back(p->name.substr(0, p->name.size() - strlen(kA)));
  return out;
}

graph::Tensor addLora(graph::Graph& g, const graph::ParameterStore& store,
                      const std::string& prefix, graph::Tensor x, graph::Tensor y) {
  if (!hasLora(store, prefix)) return y;
  const graph::Parameter& a = store.at(loraA(prefix));
  const graph::Parameter& b = store.at(loraB(prefix));
  const ops::Shape xs = g.shape(x), ys = g.shape(y);
  if (xs.rank() != ys.rank() || xs.back() != a.shape[0] || ys.back() != b.shape[1] ||
      xs.rows() != ys.rows())
    throw ShapeError(g.describe("addLora", {x, y}) + ": the adapter of \"" + prefix + "\" is " +
                     a.shape.str() + " x " + b.shape.str());
  // scale · (x·A) on the (rows, r) product, the smallest of the three.
  const graph::Tensor xa =
      g.mul(g.matmul(x, g.parameter(a)), g.parameter(store.at(loraScale(prefix))));
  return g.matmulAdd(xa, g.parameter(b), {}, y);
}

std::vector<SavedTensor> loraInitialValues(const graph::ParameterStore& store, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<SavedTensor> out;
  for (const std::string& prefix : loraPrefixes(store)) {
    const graph::Parameter& a = store.at(loraA(prefix));
    const graph::Parameter& b = store.at(loraB(prefix));
    const float bound = a.init.b;  // declareLora's U(-bound, bound)
    std::vector<float> values(size_t(a.shape.numel()));
    // The top 24 bits of each draw: a uniform in [0, 1) exact in f32.
    for (float& v : values) v = bound * (2.0f * float(double(rng() >> 40) * 0x1.0p-24) - 1.0f);
    out.push_back(f32Tensor(a.name, {a.shape[0], a.shape[1]}, values));
    out.push_back(f32Tensor(b.name, {b.shape[0], b.shape[1]},
                            std::vector<float>(size_t(b.shape.numel()), 0.0f)));
    out.push_back(f32Tensor(loraScale(prefix), {1}, {store.at(loraScale(prefix)).init.a}));
  }
  return out;
}

std::vector<SavedTensor> mergeLora(const std::vector<SavedTensor>& parameters) {
  std::map<std::string, SavedTensor> f32;  // every tensor as f32, by name
  for (const SavedTensor& t : parameters) f32[t.name] = convertSaved(t, ops::DType::F32);
  auto value = [](const SavedTensor& t, size_t i) { return double(wordToFloat(t.data[i])); };
  std::vector<std::string> prefixes;
  for (const auto& [name, t] : f32)
    if (endsWith(name, kA)) prefixes.push_back(name.substr(0, name.size() - strlen(kA)));
  for (const std::string& prefix : prefixes) {
    const auto w = f32.find(prefix + ".w"), b = f32.find(loraB(prefix)),
               s = f32.find(loraScale(prefix));
    const SavedTensor& a = f32.at(loraA(prefix));
    if (w == f32.end() || b == f32.end() || s == f32.end() || w->second.shape.size() != 2 ||
        a.shape.size() != 2 || b->second.shape.size() != 2 ||
        w->second.shape != std::vector<int64_t>{a.shape[0], b->second.shape[1]} ||
        a.shape[1] != b->second.shape[0])
      throw Error("mergeLora: the adapter of \"" + prefix +
                  "\" has no matching weight, B or scale (A " + graph::dimsText(a.shape) + ")");
    const size_t in = size_t(a.shape[0]), r = size_t(a.shape[1]), out = size_t(w->second.shape[1]);
    const double scale = value(s->second, 0);
    SavedTensor& wt = w->second;
    for (size_t i = 0; i < in; ++i)
      for (size_t j = 0; j < out; ++j) {
        double delta = 0;
        for (size_t k = 0; k < r; ++k) delta += value(a, i * r + k) * value(b->second, k * out + j);
        wt.data[i * out + j] = floatToWord(float(value(wt, i * out + j) + scale * delta));
      }
  }
  std::vector<SavedTensor> out;
  for (const SavedTensor& t : parameters) {
    const std::string& n = t.name;
    if (endsWith(n, kA) || endsWith(n, ".lora_b") || endsWith(n, ".lora_scale")) continue;
    const bool merged = std::any_of(prefixes.begin(), prefixes.end(),
                                    [&](const std::string& p) { return n == p + ".w"; });
    out.push_back(merged ? f32.at(n) : t);
  }
  return out;
}

}  // namespace vkgrad::nn
