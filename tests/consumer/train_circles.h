// What both consumers do with vkgrad: train a small MLP on two rings (radius 0.4: class 0,
// radius 1.0: class 1) for 200 steps. Returns true when the loss fell below 30 % of its
// start, printing both.
#pragma once

#include <cmath>
#include <cstdio>
#include <vector>

#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vk/context.h"

inline bool trainCircles(vkgrad::vk::Context& context, const char* who) {
  using namespace vkgrad;
  const int n = 256;
  std::vector<float> x;
  std::vector<uint32_t> y;
  for (int i = 0; i < n; ++i) {
    const float a = 6.2831853f * float(i) / float(n), r = i % 2 ? 1.0f : 0.4f;
    x.push_back(r * std::cos(a));
    x.push_back(r * std::sin(a));
    y.push_back(uint32_t(i % 2));
  }
  graph::ParameterStore store(context);
  store.add("l0.w", {2, 16}, graph::Init::xavierUniform());
  store.add("l0.b", {16}, graph::Init::zeros());
  store.add("l1.w", {16, 2}, graph::Init::xavierUniform());
  store.add("l1.b", {2}, graph::Init::zeros());
  store.initialize(1);
  const graph::Dataset dx = graph::uploadDataset(context, "x", {n, 2}, x);
  const graph::Dataset dy = graph::uploadDataset(context, "y", {n}, y);
  auto loss = [&](graph::Graph& g, std::span<const graph::Tensor> batch) {
    auto p = [&](const char* name) { return g.parameter(store.at(name)); };
    const graph::Tensor h = g.gelu(g.matmul(batch[0], p("l0.w"), p("l0.b")));
    return g.crossEntropy(g.matmul(h, p("l1.w"), p("l1.b")), batch[1]);
  };
  graph::TrainerOptions to;
  to.batch = n;
  to.schedule = graph::Schedule::constant(0.05f);
  graph::Trainer trainer(context, store, {&dx, &dy}, loss, to);
  std::vector<uint32_t> all(n);
  for (int i = 0; i < n; ++i) all[size_t(i)] = uint32_t(i);
  const float before = *trainer.step(all, true);
  for (int s = 0; s < 199; ++s) trainer.stepAsync(all);  // the render-loop form
  const float after = trainer.lastLoss();
  std::printf("%s: loss %.4f -> %.4f\n", who, double(before), double(after));
  return after < 0.3f * before;
}
