// vkgrad-bench as a user runs it: every op prints one JSON object per result with the
// fields BENCHMARKS.md relies on, its results check out against the CPU, and bad arguments
// fail cleanly. Sizes are tiny: this checks the program, not the speed.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "apps/run_app.h"
#include "common/vk_test.h"
#include "vkgrad/io/json_io.h"

namespace vkgrad::test {
namespace {

// Runs vkgrad-bench with --json and the validation layer on, and returns one parsed object
// per stdout line.
std::vector<graph::Json> runJson(std::vector<std::string> args,
                                 std::vector<std::pair<std::string, std::string>> env = {}) {
  args.insert(args.end(), {"--json", "--iters", "3", "--warmup", "1"});
  env.push_back({"VKGRAD_VALIDATION", "1"});
  const AppRun run = runApp("bench", args, env);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_FALSE(contains(run.err, "alidation")) << run.err;
  std::vector<graph::Json> lines;
  std::istringstream out(run.out);
  for (std::string line; std::getline(out, line);) {
    try {
      lines.push_back(graph::parseJson(line, "vkgrad-bench --json"));
      if (!lines.back().is_object()) ADD_FAILURE() << "not a JSON object: " << line;
    } catch (const std::exception& e) {
      ADD_FAILURE() << "not one JSON object: " << line << " (" << e.what() << ")";
    }
  }
  return lines;
}

void expectTimed(const graph::Json& line) {
  EXPECT_GT(line.at("ms").get<double>(), 0.0);
  EXPECT_LE(line.at("min_ms").get<double>(), line.at("ms").get<double>());
  EXPECT_GE(line.at("max_ms").get<double>(), line.at("ms").get<double>());
  EXPECT_EQ(line.at("iters").get<double>(), 3.0);
  EXPECT_TRUE(line.at("checked").get<bool>());
  EXPECT_FALSE(line.at("device").get<std::string>().empty());
}

TEST(BenchApp, MatmulReportsEveryVariantChecked) {
  const auto lines = runJson({"matmul", "--m", "33", "--n", "17", "--k", "9", "--variant", "all"});
  // The coopmat variant runs where the device (the one the app picks, as the tests do) has
  // cooperative matrices.
  // The texel variant runs where the device has subgroup shuffle (not under vulkan12-minimum).
  const bool coopmat = sharedContext().info().coopmat;
  const bool texel = sharedContext().info().subgroup_shuffle;
  const size_t vector = texel ? 3 : 2;
  ASSERT_EQ(lines.size(), vector + 1 + (coopmat ? 1 : 0));
  EXPECT_EQ(lines[vector].at("variant").get<std::string>(), "vector");
  EXPECT_FALSE(lines[vector].at("tiling").get<std::string>().empty());
  if (coopmat) {
    EXPECT_EQ(lines[vector + 1].at("variant").get<std::string>(), "coopmat");
    EXPECT_EQ(lines[vector + 1].at("inputs").get<std::string>(), "f32");
  }
  for (const graph::Json& line : lines) {
    EXPECT_EQ(line.at("check").get<std::string>(), "all");
    EXPECT_EQ(line.at("op").get<std::string>(), "matmul");
    EXPECT_EQ(line.at("m").get<double>(), 33.0);
    EXPECT_EQ(line.at("n").get<double>(), 17.0);
    EXPECT_EQ(line.at("k").get<double>(), 9.0);
    EXPECT_GT(line.at("gflops").get<double>(), 0.0);
    // Coopmat rounds each input to fp16 (relative error up to 2^-11 each) before its exact
    // products and fp32 sums, ~3e-4 normalised; the app itself fails above 1e-3. The others
    // keep fp32 inputs.
    const bool half = line.at("variant").get<std::string>() == "coopmat";
    EXPECT_LT(line.at("error").get<double>(), half ? 1e-3 : 1e-5);
    expectTimed(line);
  }
}

TEST(BenchApp, BandwidthOpsReportGbpsAgainstTheCopyKernel) {
  const std::vector<std::vector<std::string>> runs = {
      {"copy", "--n", "4099"},
      {"elementwise", "--n", "4096", "--kind", "all"},
      {"softmax", "--rows", "7", "--cols", "129", "--variant", "all"},
      {"layernorm", "--rows", "7", "--cols", "129", "--variant", "all"},
      // The backward: every variant with every way of summing dgamma and dbeta; 68 columns
      // take the RGBA32F layouts (and WithDx where it applies), 67 rows a short last block.
      {"layernorm", "--rows", "67", "--cols", "68", "--variant", "all", "--backward", "--params",
       "all"},
      // The general kernels; 1500 columns fold in parts for sum_cols (ops::mapReduceScratch).
      {"general", "--rows", "3", "--cols", "1500"}};
  const size_t expected_lines[] = {2, 6, 4, 4, 12, 6};
  for (size_t i = 0; i < runs.size(); ++i) {
    SCOPED_TRACE(runs[i][0]);
    const auto lines = runJson(runs[i]);
    ASSERT_EQ(lines.size(), expected_lines[i]);
    const bool backward = std::find(runs[i].begin(), runs[i].end(), "--backward") != runs[i].end();
    for (const graph::Json& line : lines) {
      EXPECT_EQ(line.at("op").get<std::string>(),
                backward ? std::string("layernorm_backward") : runs[i][0]);
      EXPECT_GT(line.at("gbps").get<double>(), 0.0);
      EXPECT_GT(line.at("copy_gbps").get<double>(), 0.0);
      EXPECT_NEAR(line.at("ratio").get<double>(),
                  line.at("gbps").get<double>() / line.at("copy_gbps").get<double>(), 1e-3);
      EXPECT_LT(line.at("error").get<double>(), 1e-5);
      expectTimed(line);
    }
  }
}

// adamw: the GPT's 53 parameter tensors (or a multiple) updated one dispatch per tensor and
// in one dispatch, from the same start: the same bits (error 0 against the first variant).
TEST(BenchApp, AdamwComparesOneDispatchPerTensorWithOneForAll) {
  const auto lines = runJson({"adamw", "--tensors", "2"});
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("variant").get<std::string>(), "each");
  EXPECT_EQ(lines[1].at("variant").get<std::string>(), "many");
  for (const graph::Json& line : lines) {
    EXPECT_EQ(line.at("op").get<std::string>(), "adamw");
    EXPECT_EQ(line.at("tensors").get<double>(), 106.0);
    EXPECT_GT(line.at("gbps").get<double>(), 0.0);
    EXPECT_EQ(line.at("error").get<double>(), 0.0);
    expectTimed(line);
  }
  EXPECT_EQ(runApp("bench", {"adamw", "--variant", "fused"}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"adamw", "--tensors", "0"}).exit_code, 2);
}

// folds: each fold (bias, gelu, act, residual, stream) against its separate passes, the same
// results within 1e-5; an odd row count (off every tile and vec4 grid of the row axis).
TEST(BenchApp, FoldsCompareEachFoldWithItsSeparatePasses) {
  const auto lines = runJson({"folds", "--rows", "37", "--rounds", "1"});
  ASSERT_EQ(lines.size(), 10u);
  const char* want[][2] = {{"bias", "separate"},     {"bias", "folded"},     {"gelu", "separate"},
                           {"gelu", "folded"},       {"act", "separate"},    {"act", "folded"},
                           {"residual", "separate"}, {"residual", "folded"}, {"stream", "separate"},
                           {"stream", "folded"}};
  for (size_t i = 0; i < lines.size(); ++i) {
    const graph::Json& line = lines[i];
    EXPECT_EQ(line.at("op").get<std::string>(), "folds");
    EXPECT_EQ(line.at("fold").get<std::string>(), want[i][0]);
    EXPECT_EQ(line.at("variant").get<std::string>(), want[i][1]);
    EXPECT_EQ(line.at("rows").get<double>(), 37.0);
    EXPECT_LE(line.at("error").get<double>(), 1e-5);
    EXPECT_GT(line.at("ratio").get<double>(), 0.0);
    expectTimed(line);
  }
  EXPECT_EQ(runApp("bench", {"folds", "--fold", "relu"}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"folds", "--rows", "0"}).exit_code, 2);
}

// --tiling picks the vector kernel's tile; --sample checks sampled elements only (the default
// above 2048³).
// --shapes gpt: the 15 products of the 4-layer GPT step (5 linears x forward, dX, dW), each
// checked, with how often a step runs it; the Vector variant reports its split-K.
TEST(BenchApp, MatmulTimesTheGptStepsProducts) {
  for (const char* variant : {"auto", "vector"}) {
    SCOPED_TRACE(variant);
    const auto lines = runJson({"matmul", "--shapes", "gpt", "--variant", variant});
    ASSERT_EQ(lines.size(), 15u);
    int steps_products = 0, split = 0;
    for (const graph::Json& line : lines) {
      EXPECT_EQ(line.at("preset").get<std::string>(), "gpt");
      EXPECT_GT(line.at("ms").get<double>(), 0.0);
      EXPECT_LT(line.at("error").get<double>(), 1e-5);
      const std::string kind = line.at("kind").get<std::string>();
      EXPECT_EQ(line.at("transA").get<bool>(), kind == "dW");
      EXPECT_EQ(line.at("transB").get<bool>(), kind == "dX");
      steps_products += int(line.at("count").get<double>());
      if (line.at("split").get<double>() > 1) ++split;
    }
    EXPECT_EQ(steps_products, 3 * (4 * 4 + 1));
    if (std::string(variant) == "vector") {
      EXPECT_GT(split, 0);
    }
  }
  EXPECT_EQ(runApp("bench", {"matmul", "--shapes", "bert"}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"matmul", "--shapes", "gpt", "--variant", "all"}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"matmul", "--split", "sometimes"}).exit_code, 2);
}

TEST(BenchApp, MatmulTakesATilingAndSamplesLargeProducts) {
  const auto lines = runJson({"matmul", "--m", "129", "--n", "68", "--k", "36", "--variant",
                              "vector", "--tiling", "8x8x16x4x4", "--sample"});
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].at("tiling").get<std::string>(), "8x8x16x4x4");
  EXPECT_EQ(lines[0].at("check").get<std::string>(), "sampled");
  EXPECT_LT(lines[0].at("error").get<double>(), 1e-5);
  expectTimed(lines[0]);
  const AppRun bad = runApp("bench", {"matmul", "--variant", "vector", "--tiling", "16x16"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "--tiling must be auto or WXxWYxBKxTMxTN")) << bad.err;
  // Zeros used to read as "no tiling" and run the default one without a word.
  const AppRun zeros = runApp("bench", {"matmul", "--tiling", "0x0x0x0x0"});
  EXPECT_EQ(zeros.exit_code, 2);
  EXPECT_TRUE(contains(zeros.err, "--tiling's numbers must be in [1, 1024]")) << zeros.err;
}

TEST(BenchApp, AttentionTimesFlashAndTheReferenceSideBySide) {
  // texel runs on CPU devices only: elsewhere --variant texel fails and all leaves it out.
  const bool cpu = sharedContext().info().isCpu();
  for (const char* variant : {"shared", "texel", "all"}) {
    if (!cpu && std::string(variant) == "texel") {
      const AppRun run = runApp("bench", {"attention", "--variant", "texel"});
      EXPECT_EQ(run.exit_code, 1);
      EXPECT_TRUE(contains(run.err, "the texel variant needs a CPU device")) << run.err;
      continue;
    }
    const auto lines = runJson({"attention", "--b", "2", "--h", "3", "--t", "17", "--d", "16",
                                "--causal", "--backward", "--variant", variant});
    // all: shared and texel where the device runs both, then the reference.
    const bool all = std::string(variant) == "all";
    ASSERT_EQ(lines.size(), all && cpu ? 3u : 2u);
    for (size_t i = 0; i + 1 < lines.size(); ++i) {
      EXPECT_EQ(lines[i].at("impl").get<std::string>(), "flash");
      EXPECT_EQ(lines[i].at("variant").get<std::string>(),
                all ? (i == 0 ? "shared" : "texel") : variant);
    }
    EXPECT_EQ(lines.back().at("impl").get<std::string>(), "reference");
    for (const graph::Json& line : lines) {
      EXPECT_EQ(line.at("op").get<std::string>(), "attention");
      EXPECT_TRUE(line.at("causal").get<bool>());
      EXPECT_TRUE(line.at("backward").get<bool>());
      // 14 multiply-add flops per visible pair and head dim: 2*3 heads * 17*18/2 pairs * 16.
      EXPECT_NEAR(line.at("gflop").get<double>(), 14.0 * 6 * 153 * 16 * 1e-9, 1e-12);
      // q, k, v, o, dout, dq, dk, dv: 2*17*3*16 floats each.
      EXPECT_GE(line.at("device_bytes").get<double>(), 4.0 * 8 * 1632);
      EXPECT_LT(line.at("error").get<double>(), 1e-4);
      expectTimed(line);
    }
    // The reference also stores P and dP, 2*3*17*17 floats each; flash stores LSE and one
    // row dot per query.
    EXPECT_GE(
        lines.back().at("device_bytes").get<double>() - lines[0].at("device_bytes").get<double>(),
        4.0 * 2 * 1734 - 4.0 * 2 * 102);
  }
}

// spmm over a random graph, weighted per head and unweighted: GB/s of the bytes the header
// of apps/bench/bench_spmm.cpp counts, 4 (N + 1 + E + E H + E F + N F), checked on the CPU.
TEST(BenchApp, SpmmReportsTheBytesItMustMove) {
  for (const int64_t heads : {3, 0}) {
    SCOPED_TRACE(heads);
    const auto lines = runJson({"spmm", "--nodes", "101", "--edges", "503", "--features", "9",
                                "--heads", std::to_string(heads)});
    ASSERT_EQ(lines.size(), 1u);
    const graph::Json& line = lines[0];
    EXPECT_EQ(line.at("op").get<std::string>(), "spmm");
    EXPECT_EQ(line.at("nodes").get<double>(), 101.0);
    EXPECT_EQ(line.at("edges").get<double>(), 503.0);
    EXPECT_EQ(line.at("features").get<double>(), 9.0);
    EXPECT_EQ(line.at("heads").get<double>(), double(heads));
    EXPECT_EQ(line.at("bytes").get<double>(),
              4.0 * double(102 + 503 + 503 * heads + 503 * 9 + 101 * 9));
    EXPECT_GT(line.at("gbps").get<double>(), 0.0);
    EXPECT_LT(line.at("error").get<double>(), 1e-5);
    expectTimed(line);
  }
  EXPECT_EQ(runApp("bench", {"spmm", "--features", "9", "--heads", "2"}).exit_code, 2);
}

// cached-attention: one decoding step (cache write, attention) checked against the fp64
// reference, naming the build that ran; within 4 storage buffers the .sb4 build, with the same
// bits (the same error). Grouped heads, an odd head dim, 3 new rows near the cache's end.
TEST(BenchApp, CachedAttentionNamesTheBuildThatRan) {
  const std::vector<std::string> args = {
      "cached-attention", "--h", "4",          "--kv-heads", "2",   "--d", "17",
      "--rows",           "40",  "--position", "35",         "--r", "3"};
  const auto usual = runJson(args, {{"VKGRAD_LIMITS", ""}});
  const auto four = runJson(args, {{"VKGRAD_LIMITS", "storage-buffers=4"}});
  ASSERT_EQ(usual.size(), 1u);
  ASSERT_EQ(four.size(), 1u);
  EXPECT_EQ(four[0].at("variant").get<std::string>(), "sb4");
  for (const graph::Json& line : {usual[0], four[0]}) {
    EXPECT_EQ(line.at("op").get<std::string>(), "cached_attn");
    EXPECT_EQ(line.at("keys").get<double>(), 38.0);
    EXPECT_LE(line.at("error").get<double>(), 1e-4);
    expectTimed(line);
  }
  EXPECT_EQ(usual[0].at("error").get<double>(), four[0].at("error").get<double>());
  EXPECT_EQ(runApp("bench", {"cached-attention", "--h", "4", "--kv-heads", "3"}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"cached-attention", "--rows", "8", "--position", "8"}).exit_code, 2);
}

TEST(BenchApp, HelpExitsZeroAndBadArgumentsExitTwo) {
  const AppRun help = runApp("bench", {"--help"});
  EXPECT_EQ(help.exit_code, 0);
  for (const char* op : {"matmul", "copy", "elementwise", "softmax", "layernorm"})
    EXPECT_TRUE(contains(help.out, op)) << help.out;
  const AppRun op_help = runApp("bench", {"softmax", "--help"});
  EXPECT_EQ(op_help.exit_code, 0);
  EXPECT_TRUE(contains(op_help.out, "--rows")) << op_help.out;
  EXPECT_EQ(runApp("bench", {}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"no-such-op"}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"softmax", "--variant", "fastest"}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"layernorm", "--backward", "--params", "fastest"}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"elementwise", "--n", "0"}).exit_code, 2);
  EXPECT_EQ(runApp("bench", {"matmul", "--rows", "3"}).exit_code, 2);  // softmax's option
}

}  // namespace
}  // namespace vkgrad::test
