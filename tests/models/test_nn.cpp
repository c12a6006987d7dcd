// models/nn: a pre-norm block built from the nn functions gives the same loss as the
// transformer block written out op by op in tests/runtime/transformer_block.h, with the same
// weights; the blocks reject bad shapes while the graph is built.
#include <map>
#include <string>
#include <vector>

#include "common/random.h"
#include "common/vk_test.h"
#include "runtime/transformer_block.h"
#include "vkgrad/core/error.h"
#include "vkgrad/nn/transformer.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Tensor;

class NnTest : public VkTest {
 protected:
  Rng rng_;
};

float runLoss(vk::Context& context, Graph& g, Tensor loss, Tensor ids, Tensor targets,
              const std::vector<uint32_t>& id_values, const std::vector<uint32_t>& target_values) {
  g.markOutput(loss);
  graph::Executor exec(context, g);
  exec.setInput(ids, id_values);
  exec.setInput(targets, target_values);
  exec.step();
  return exec.readScalar(loss);
}

TEST_F(NnTest, PreNormBlockMatchesHandWrittenTransformer) {
  const TinyTransformer c;
  graph::ParameterStore reference(ctx()), store(ctx());
  addTransformerParameters(reference, c);
  reference.initialize(rng_.seed());

  nn::declareEmbedding(store, "emb", c.vocab, c.seq, c.dim);
  nn::BlockConfig block;
  block.width = c.dim;
  block.heads = c.heads;
  block.hidden = c.hidden;
  block.norm = nn::Norm::Pre;
  block.activation = nn::ActivationSpec::gelu();
  nn::declareBlock(store, "h0", block);
  nn::declareLinear(store, "head", c.dim, c.vocab, graph::Init::xavierUniform(), /*bias=*/false);
  const std::map<std::string, std::string> names = {
      {"tok", "emb.tok"},           {"pos", "emb.pos"},          {"ln1.g", "h0.ln1.g"},
      {"ln1.b", "h0.ln1.b"},        {"ln2.g", "h0.ln2.g"},       {"ln2.b", "h0.ln2.b"},
      {"qkv.w", "h0.attn.qkv.w"},   {"qkv.b", "h0.attn.qkv.b"},  {"proj.w", "h0.attn.proj.w"},
      {"proj.b", "h0.attn.proj.b"}, {"mlp1.w", "h0.mlp.fc.w"},   {"mlp1.b", "h0.mlp.fc.b"},
      {"mlp2.w", "h0.mlp.proj.w"},  {"mlp2.b", "h0.mlp.proj.b"}, {"head", "head.w"}};
  ASSERT_EQ(store.all().size(), names.size());
  for (const auto& [from, to] : names) {
    const graph::Parameter& src = reference.at(from);
    const graph::Parameter& dst = store.at(to);
    ASSERT_EQ(src.shape, dst.shape) << from << " -> " << to;
    std::vector<float> values(size_t(src.shape.numel()));
    ctx().staging().download(*src.buffer, src.offset, values.data(), values.size() * 4);
    ctx().staging().upload(*dst.buffer, dst.offset, values.data(), values.size() * 4);
  }

  const int64_t batch = 3;
  std::vector<uint32_t> ids(size_t(batch * c.seq)), targets(ids.size());
  for (auto& v : ids) v = rng_.below(uint32_t(c.vocab));
  for (auto& v : targets) v = rng_.below(uint32_t(c.vocab));

  Graph g1;
  const Tensor ids1 = g1.input("ids", {batch, c.seq}, ops::DType::U32);
  const Tensor targets1 = g1.input("targets", {batch, c.seq}, ops::DType::U32);
  const Tensor loss1 = transformerLoss(g1, reference, c, ids1, targets1);
  const float expected = runLoss(ctx(), g1, loss1, ids1, targets1, ids, targets);

  Graph g2;
  const Tensor ids2 = g2.input("ids", {batch, c.seq}, ops::DType::U32);
  const Tensor targets2 = g2.input("targets", {batch, c.seq}, ops::DType::U32);
  Tensor x = nn::embedding(g2, store, "emb", ids2);
  x = nn::block(g2, store, "h0", block, x);
  const Tensor loss2 = g2.crossEntropy(nn::linear(g2, store, "head", x), targets2);
  const float actual = runLoss(ctx(), g2, loss2, ids2, targets2, ids, targets);

  // The same ops in the same order on the same data: the same bits.
  EXPECT_EQ(actual, expected) << rng_.describe();
}

TEST_F(NnTest, BlocksRejectBadShapes) {
  graph::ParameterStore store(ctx());
  nn::declareEmbedding(store, "emb", 5, 4, 6);
  nn::declareAttention(store, "attn", 6);
  Graph g;
  EXPECT_THROW(nn::embedding(g, store, "emb", g.input("ids", {2, 5}, ops::DType::U32)), ShapeError);
  const Tensor x = g.input("x", {2, 4, 6});
  EXPECT_THROW(nn::attention(g, store, "attn", x, /*heads=*/4, /*causal=*/true), ShapeError);
  EXPECT_THROW(nn::linear(g, store, "missing", x), Error);
}

}  // namespace
}  // namespace vkgrad::test
