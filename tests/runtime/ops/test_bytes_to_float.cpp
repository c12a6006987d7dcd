// The graph's bytesToFloat op (engine/vkgrad/runtime/ops/bytes_to_float.cpp): its shape rule (the ops
// layer's, same text), and images kept as bytes in a Dataset, gathered by batch indices and
// widened on the device, against the CPU. The kernel itself is checked in
// tests/ops/test_bytes_to_float.cpp.
#include <cstring>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "common/compare.h"
#include "common/expect.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/ops/bytes_to_float.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/ops/bytes_to_float.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::OpKind;
using graph::Tensor;
using ops::DType;

TEST(GraphBytesToFloatTest, ChecksShapesWithTheOpsRule) {
  Graph g;
  const Tensor words = g.input("words", {9, 49}, DType::U32);
  const Tensor x = graph::bytesToFloat(g, words, {9, 14, 14}, 1.0f / 255, -0.5f);
  EXPECT_EQ(g.shape(x), (ops::Shape{9, 14, 14}));
  EXPECT_EQ(g.tensor(x).dtype, DType::F32);
  EXPECT_FALSE(g.tensor(x).differentiable);
  EXPECT_EQ(g.nodes().back().op, OpKind::BytesToFloat);
  const size_t nodes = g.nodes().size();
  const Tensor floats = g.input("floats", {9, 49});
  const std::vector<std::pair<Tensor, ops::Shape>> bad = {
      {words, {9, 14, 15}}, {words, {7, 4, 63}}, {floats, {9, 196}}};
  for (const auto& pair : bad) {
    const Tensor in = pair.first;  // lambdas capture variables, not structured bindings
    const ops::Shape out = pair.second;
    EXPECT_EQ(shapeErrorText([&] { graph::bytesToFloat(g, in, out, 1.0f); }), shapeErrorText([&] {
                ops::bytesToFloatShape(g.shape(in), g.tensor(in).dtype, out);
              }));
  }
  EXPECT_NE(shapeErrorText([&] {
              graph::bytesToFloat(g, words, {9, 14, 15}, 1.0f);
            }),
            "(no ShapeError)");
  EXPECT_EQ(g.nodes().size(), nodes);
}

class GraphBytesToFloatGpuTest : public VkTest {};

// The way images are fed: uploaded once as bytes (4 per word), a batch gathered by indices,
// then widened and normalised. Exact data movement, so only the f32 arithmetic of
// byte * scale + shift differs from the reference (~2 ulp): 1e-6 normalised error.

TEST_F(GraphBytesToFloatGpuTest, GathersAndWidensImageBatches) {
  vk::Context& context = ctx();
  Rng rng;
  SCOPED_TRACE(rng.describe());
  const int64_t images = 37, rows = 5, cols = 8, batch = 9, row_words = rows * cols / 4;
  const auto values = rng.below(size_t(images * rows * cols), 256);
  std::vector<uint8_t> pixels(values.begin(), values.end());
  std::vector<uint32_t> packed(pixels.size() / 4);
  std::memcpy(packed.data(), pixels.data(), pixels.size());
  const graph::Dataset data =
      graph::uploadDataset(context, "images", {images, row_words}, std::span(packed));
  const float scale = 1.0f / 255, shift = -0.5f;

  Graph g;
  const Tensor ids = g.input("ids", {batch}, DType::U32);
  const Tensor x =
      graph::bytesToFloat(g, g.gather(g.dataset(data), ids), {batch, rows, cols}, scale, shift);
  g.markOutput(x);
  graph::Executor exec(context, g);
  for (int step = 0; step < 2; ++step) {
    const auto batch_ids = rng.below(size_t(batch), uint32_t(images));
    exec.setInput(ids, batch_ids);
    exec.step();
    std::vector<float> want;
    for (uint32_t id : batch_ids)
      for (int64_t p = 0; p < rows * cols; ++p)
        want.push_back(float(double(pixels[size_t(id * rows * cols + p)]) * scale + shift));
    EXPECT_TRUE(allClose(exec.read(x), want, 1e-6)) << "step " << step;
  }
}

}  // namespace
}  // namespace vkgrad::test
