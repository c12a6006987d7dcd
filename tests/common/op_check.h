// The graph-level check every general op's test runs (tests/runtime/ops/): a graph whose leaves
// are parameters of the given shapes, one op (or a few) on them, checked forward against a
// CPU computation and backward against finite differences of loss = sum(w * out), w fixed
// random weights, through the whole compiled graph (graph_gradcheck.h).
#pragma once

#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "common/random.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/vk/context.h"

namespace vkgrad::test {

struct Leaf {
  ops::Shape shape;
  graph::Init init = graph::Init::uniform(-1.0f, 1.0f);
};
using Values = std::vector<std::vector<float>>;  // the leaves' values, in order
// A u32 input fed before the step (a condition, ids): build sees it after the leaves.
struct WordInput {
  ops::Shape shape;
  std::vector<uint32_t> values;
};

// build: the op(s) under test on the leaves' tensors. want: the expected output computed from
// the leaves' values (row-major), compared at `tolerance` (allClose); null skips it.
::testing::AssertionResult checkGraphOp(
    vk::Context& context, Rng& rng, const std::vector<Leaf>& leaves,
    const std::function<graph::Tensor(graph::Graph&, const std::vector<graph::Tensor>&)>& build,
    const std::function<std::vector<float>(const Values&)>& want, double tolerance = 1e-6,
    const std::vector<WordInput>& words = {});

// Row-major index helpers for the tests' CPU computations.
int64_t flatIndex(const ops::Shape& shape, const std::vector<int64_t>& index);
std::vector<int64_t> unflatIndex(const ops::Shape& shape, int64_t flat);

}  // namespace vkgrad::test
