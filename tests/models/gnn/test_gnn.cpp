// models/gnn: the three models learn Zachary's karate club from one labelled member per
// faction and a small stochastic block model from a few labels per community; a seed gives
// the same bits twice; graph classification (cycle or not) beats chance by a wide margin;
// bad configurations are refused with errors that say what is wrong.
#include "vkgrad/gnn/gnn.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/gnn/datasets.h"

namespace vkgrad::test {
namespace {

using gnn::GnnConfig;
using gnn::Model;

// Full-graph training: `epochs` Adam steps whose batch is every row of `ids`; returns the
// last step's loss.
float trainFullGraph(vk::Context& context, graph::ParameterStore& store, const GnnConfig& config,
                     const gnn::GraphData& data, const graph::Dataset& labels,
                     const graph::Dataset& ids, int epochs, float lr, float weight_decay) {
  graph::TrainerOptions options;
  options.batch = ids.shape[0];
  options.schedule = graph::Schedule::constant(lr);
  options.optimizer.adamw.weight_decay = weight_decay;
  graph::Trainer trainer(context, store, {&ids}, gnn::gnnLossFn(store, config, data, labels),
                         options);
  std::vector<uint32_t> all(size_t(options.batch));
  std::iota(all.begin(), all.end(), 0u);
  float loss = NAN;
  for (int e = 1; e <= epochs; ++e)
    if (const auto l = trainer.step(all, e == epochs)) loss = *l;
  return loss;
}

class GnnTest : public VkTest {
 protected:
  // Trains `config` on a node task with the given labelled nodes; returns the accuracy on
  // the others and (optionally) the last loss.
  double trainNodes(const gnn::NodeData& d, GnnConfig config, const std::vector<uint32_t>& train,
                    int epochs, float lr, uint64_t seed, float* last_loss = nullptr) {
    std::vector<uint32_t> test;
    std::vector<bool> is_train(size_t(d.nodes), false);
    for (uint32_t n : train) is_train[n] = true;
    for (uint32_t n = 0; n < uint32_t(d.nodes); ++n)
      if (!is_train[n]) test.push_back(n);
    config.in = d.feature_dim;
    config.classes = d.classes;
    const gnn::GraphData data = gnn::uploadGraphData(ctx(), d.name, config.model, d.nodes, d.edges,
                                                     d.features, d.feature_dim);
    const graph::Dataset labels = graph::uploadDataset(ctx(), "labels", {d.nodes}, d.labels);
    const graph::Dataset train_ids =
        graph::uploadDataset(ctx(), "train", {int64_t(train.size())}, train);
    const graph::Dataset test_ids =
        graph::uploadDataset(ctx(), "test", {int64_t(test.size())}, test);
    graph::ParameterStore store(ctx());
    gnn::declareGnn(store, config);
    store.initialize(seed);
    const float loss =
        trainFullGraph(ctx(), store, config, data, labels, train_ids, epochs, lr, 5e-4f);
    if (last_loss) *last_loss = loss;
    gnn::Evaluator evaluator(ctx(), store, config, data, labels, test_ids);
    return gnn::accuracy(evaluator.confusion(), config.classes);
  }
};

GnnConfig configFor(Model m) {
  GnnConfig c;
  c.model = m;
  c.hidden = m == Model::Gat ? 8 : 16;
  c.heads = 4;
  return c;
}

// Karate, nodes 0 (Mr. Hi) and 33 (the officer) labelled, 100 full-graph Adam steps: the 32
// others. Measured here (lavapipe, seeds 1-13): GCN 93.8-96.9 %, GAT 81.2-100 %; 16 more
// random seeds on 2026-11-30: GAT 84.4-96.9 %, but one seed of a profile run gave exactly
// 75.0 % (2953666117814854767). Thresholds: 90 % for GCN, 75 % for GAT, GAT's as the median
// of three seeds (the seed's, +1, +2), so one tail draw does not fail it; chance is 50 %, one
// faction for all 53 %. The notes' conv layer (no degree normalisation: the two leaders'
// hubs dominate) swings from 53 % to 97 % with the seed here, so it is checked on the block
// model below instead.
TEST_F(GnnTest, GcnAndGatLearnTheKarateClubFromTwoLabels) {
  const gnn::NodeData d = gnn::karateClub();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  for (Model m : {Model::Gcn, Model::Gat}) {
    SCOPED_TRACE(gnn::modelName(m));
    std::vector<double> accs;
    for (uint64_t s = 0; s < (m == Model::Gat ? 3u : 1u); ++s) {
      accs.push_back(trainNodes(d, configFor(m), {0, 33}, 100, 0.01f, rng.seed() + s));
      std::printf("karate %s: %.1f %%\n", gnn::modelName(m), 100.0 * accs.back());
    }
    std::sort(accs.begin(), accs.end());
    EXPECT_GT(accs[accs.size() / 2], m == Model::Gcn ? 0.90 : 0.75);
  }
}

// A 600-node SBM of 3 communities (about 8 neighbours inside, 2 outside; noisy features),
// 10 labelled nodes per community: the graph carries the label far beyond the features.
// Measured (seeds 1-8): GCN 90.0-99.1 %, conv 83.3-96.1 %, GAT 71.1-96.3 % (attention over
// noisy features learns slower in 100 steps). Thresholds 80 % (GCN), 70 % (conv), 55 % (GAT);
// chance is 33 %.
TEST_F(GnnTest, EachModelLearnsASmallBlockModel) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const gnn::NodeData d =
      gnn::stochasticBlockModel(600, 3, 8.0 / 199, 2.0 / 400, 8, 2.0, rng.seed());
  std::vector<uint32_t> train;
  std::vector<int> taken(3, 0);
  for (uint32_t n = 0; n < 600; ++n)
    if (taken[d.labels[n]] < 10) {
      ++taken[d.labels[n]];
      train.push_back(n);
    }
  for (Model m : {Model::Gcn, Model::Gat, Model::Conv}) {
    SCOPED_TRACE(gnn::modelName(m));
    const double acc = trainNodes(d, configFor(m), train, 100, 0.01f, rng.seed());
    std::printf("sbm %s: %.1f %%\n", gnn::modelName(m), 100.0 * acc);
    EXPECT_GT(acc, m == Model::Gcn ? 0.8 : m == Model::Conv ? 0.7 : 0.55) << "chance is 1/3";
  }
}

// The same seed twice: the same loss, bit for bit (no atomics anywhere in the step).
TEST_F(GnnTest, ASeedGivesTheSameBits) {
  const gnn::NodeData d = gnn::karateClub();
  for (Model m : {Model::Gcn, Model::Gat}) {
    float a = 0, b = 0;
    trainNodes(d, configFor(m), {0, 33}, 20, 0.01f, 5, &a);
    trainNodes(d, configFor(m), {0, 33}, 20, 0.01f, 5, &b);
    EXPECT_EQ(0, std::memcmp(&a, &b, sizeof a)) << gnn::modelName(m) << ": " << a << " vs " << b;
  }
}

// 600 graphs (480 train, 120 test) with or without a cycle, a sum-pooled 3-layer GCN, 200
// steps: measured 90.8-97.5 % (seeds 1-3); threshold 75 %, chance 50 %.
TEST_F(GnnTest, GraphClassificationBeatsChance) {
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const gnn::GraphSet set = gnn::cycleGraphs(600, rng.seed());
  auto batch = [&](size_t first, size_t last, std::vector<uint32_t>& labels) {
    int64_t nodes = 0;
    std::vector<std::pair<uint32_t, uint32_t>> edges;
    std::vector<float> features;
    std::vector<uint32_t> segments{0};
    for (size_t i = first; i < last; ++i) {
      for (const auto& [s, t] : set.graphs[i].edges)
        edges.emplace_back(uint32_t(nodes) + s, uint32_t(nodes) + t);
      features.insert(features.end(), set.graphs[i].features.begin(), set.graphs[i].features.end());
      nodes += set.graphs[i].nodes;
      segments.push_back(uint32_t(nodes));
      labels.push_back(set.labels[i]);
    }
    return gnn::uploadGraphData(ctx(), "batch", Model::Gcn, nodes, edges, features,
                                set.graphs[0].feature_dim, segments);
  };
  std::vector<uint32_t> train_labels, test_labels;
  const gnn::GraphData train = batch(0, 480, train_labels), test = batch(480, 600, test_labels);
  GnnConfig c = configFor(Model::Gcn);
  c.in = set.graphs[0].feature_dim;
  c.graph_level = true;
  c.hidden = 32;
  c.layers = 3;
  graph::ParameterStore store(ctx());
  gnn::declareGnn(store, c);
  store.initialize(rng.seed());
  auto ds = [&](const char* name, const std::vector<uint32_t>& v) {
    return graph::uploadDataset(ctx(), name, {int64_t(v.size())}, v);
  };
  std::vector<uint32_t> train_ids(480), test_ids(120);
  std::iota(train_ids.begin(), train_ids.end(), 0u);
  std::iota(test_ids.begin(), test_ids.end(), 0u);
  const graph::Dataset trl = ds("train.labels", train_labels), tel = ds("test.labels", test_labels),
                       tri = ds("train.ids", train_ids), tei = ds("test.ids", test_ids);
  trainFullGraph(ctx(), store, c, train, trl, tri, 200, 0.01f, 0.0f);
  gnn::Evaluator evaluator(ctx(), store, c, test, tel, tei);
  const double acc = gnn::accuracy(evaluator.confusion(), 2);
  std::printf("cycles gcn: %.1f %%\n", 100.0 * acc);
  EXPECT_GT(acc, 0.75) << "chance is 0.5";
}

TEST(GnnConfigTest, RejectsWhatCannotBeBuilt) {
  GnnConfig c = configFor(Model::Gcn);
  c.in = 5;
  EXPECT_NO_THROW(c.validate());
  c.layers = 20000;
  try {
    c.validate();
    ADD_FAILURE() << "20000 layers accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("layers 20000 is not in [1, 16]"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(gnn::modelFromName("gin"), Error);
  EXPECT_EQ(gnn::modelFromName("gat"), Model::Gat);
}

}  // namespace
}  // namespace vkgrad::test
