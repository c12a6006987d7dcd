// What the Hugging Face folder tests share (test_hf_gpt2, test_hf_llama, test_hf_lora,
// test_hf_llama_lora): a device fixture with a fresh folder per test, a file fixture that edits
// a folder's config and weights, the message an error carries, the relative error of two
// arrays, and f32 tensors as the folders save them.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/error_text.h"
#include "common/random.h"
#include "common/temp_dir.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/hf/model.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/io/safetensors.h"

namespace vkgrad::test {

// A device test whose tests each get an empty folder dir_ ("vkgrad-<suite>-<test>" in the
// temporary folder), removed with what it holds when the test ends.
class HfFolderTest : public VkTest {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("vkgrad-" + std::string(info->test_suite_name()) + "-" + std::string(info->name()));
    std::filesystem::remove_all(dir_);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    VkTest::TearDown();
  }

  std::filesystem::path dir_;
  Rng rng_;
};

// A folder test without a device: SetUp writes a folder of c_ at dir_; the tests edit it and
// read what hf::readHfModel says.
class HfFilesTest : public TempDirTest {
 protected:
  std::string readError() {
    return errorText([&] { hf::readHfModel(dir_); });
  }
  void editConfig(const std::string& key, const graph::Json& value) {
    graph::Json config = graph::readJsonFile(dir_ / "config.json");
    config[key] = value;
    std::ofstream(dir_ / "config.json") << graph::dumpJson(config);
  }
  // Rewrites model.safetensors through f(tensors).
  template <typename F>
  void editWeights(F&& f) {
    graph::Checkpoint cp = graph::loadSafetensors(dir_ / "model.safetensors");
    f(cp.tensors);
    graph::saveSafetensors(dir_ / "model.safetensors", cp);
  }
  gpt::GptConfig c_;
  Rng rng_;
};

#define EXPECT_ERROR_HAS(message, part) \
  EXPECT_NE((message).find(part), std::string::npos) << "error: " << (message)

// max |a - b| / max |b|.
inline double relativeError(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double diff = 0, top = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    top = std::max(top, std::abs(double(b[i])));
  }
  return diff / top;
}

// An f32 tensor of v as a folder saves it, and a saved tensor's values as f32.
inline graph::SavedTensor f32(const std::string& name, std::vector<int64_t> shape,
                              const std::vector<float>& v) {
  graph::SavedTensor t{name, ops::DType::F32, std::move(shape), std::vector<uint32_t>(v.size())};
  std::memcpy(t.data.data(), v.data(), v.size() * 4);
  return t;
}
inline std::vector<float> values(const graph::SavedTensor& t) {
  const graph::SavedTensor f = graph::convertSaved(t, ops::DType::F32);
  std::vector<float> v(f.data.size());
  std::memcpy(v.data(), f.data.data(), v.size() * 4);
  return v;
}

}  // namespace vkgrad::test
