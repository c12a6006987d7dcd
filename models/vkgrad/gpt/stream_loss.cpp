#include "vkgrad/gpt/stream_loss.h"

#include <map>
#include <memory>

#include "vkgrad/core/error.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/precision.h"

namespace vkgrad::gpt {

namespace {

void checkIds(std::span<const uint32_t> tokens, const GptConfig& config) {
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] >= uint64_t(config.vocab))
      throw Error("token " + std::to_string(i) + " has id " + std::to_string(tokens[i]) +
                  ", outside the vocabulary of " + std::to_string(config.vocab));
}

// One compiled loss graph for windows of n predicted tokens: (1,n) ids and targets.
struct WindowGraph {
  graph::Graph graph;
  graph::Tensor ids, targets, loss;
  std::unique_ptr<graph::Executor> executor;
};

}  // namespace

StreamLoss streamLoss(vk::Context& context, const graph::ParameterStore& store,
                      const GptConfig& config, std::span<const uint32_t> tokens, int64_t window) {
  config.validate();
  const int64_t n = int64_t(tokens.size());
  if (n < 2)
    throw Error("streamLoss: " + std::to_string(n) + " tokens, need at least 2 to predict one");
  if (window < 1 || window > config.context)
    throw Error("streamLoss: a window of " + std::to_string(window) +
                " tokens is outside the model's context of " + std::to_string(config.context));
  checkIds(tokens, config);
  // At most two graphs: full windows, and the shorter last one.
  std::map<int64_t, std::unique_ptr<WindowGraph>> graphs;
  auto graphFor = [&](int64_t length) -> WindowGraph& {
    std::unique_ptr<WindowGraph>& w = graphs[length];
    if (!w) {
      w = std::make_unique<WindowGraph>();
      w->graph.setTraining(false);
      w->ids = w->graph.input("ids", {1, length}, ops::DType::U32);
      w->targets = w->graph.input("targets", {1, length}, ops::DType::U32);
      w->loss = gptLoss(w->graph, store, config, w->ids, w->targets);  // (1)
      w->graph.markOutput(w->loss);
      // Parameters a store keeps in 16 bits (an imported model's) are read as stored.
      graph::applyPrecision(w->graph, graph::Precision::F32);
      w->executor = std::make_unique<graph::Executor>(context, w->graph);
    }
    return *w;
  };
  StreamLoss result;
  double sum = 0;
  for (int64_t start = 0; start + 1 < n; start += window) {
    const int64_t length = std::min(window, n - 1 - start);  // tokens predicted
    WindowGraph& w = graphFor(length);
    w.executor->setInput(w.ids, tokens.subspan(size_t(start), size_t(length)));
    w.executor->setInput(w.targets, tokens.subspan(size_t(start + 1), size_t(length)));
    w.executor->step();
    sum += double(w.executor->readScalar(w.loss)) * double(length);
    result.tokens += length;
  }
  result.loss = sum / double(result.tokens);
  return result;
}

std::vector<float> windowLogits(vk::Context& context, const graph::ParameterStore& store,
                                const GptConfig& config, std::span<const uint32_t> ids) {
  config.validate();
  const int64_t t = int64_t(ids.size());
  if (t < 1 || t > config.context)
    throw Error("windowLogits: a window of " + std::to_string(t) +
                " tokens is outside the model's context of " + std::to_string(config.context));
  checkIds(ids, config);
  graph::Graph g;
  g.setTraining(false);
  const graph::Tensor in = g.input("ids", {1, t}, ops::DType::U32);
  const graph::Tensor logits = gptLogits(g, store, config, in);  // (t, vocab)
  g.markOutput(logits);
  graph::applyPrecision(g, graph::Precision::F32);
  graph::Executor executor(context, g);
  executor.setInput(in, ids);
  executor.step();
  return executor.read(logits);
}

}  // namespace vkgrad::gpt
