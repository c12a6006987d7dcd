// The readers of outside bytes, each behind one entry point that takes the bytes as they would
// arrive (written to a file where the reader reads files). libFuzzer drives them (fuzz/, built
// with clang), and an ordinary test replays the stored inputs (tests/fuzz/corpus/<target>/)
// through the same functions, so CI keeps every input once found fixed without clang.
//
// An entry returns normally when the reader accepts the bytes and throws vkgrad::Error when it
// rejects them; anything else (a crash, a sanitizer report, another exception, a hang, memory
// beyond libFuzzer's -rss_limit_mb) is a finding.
#pragma once

#include <span>
#include <string_view>

namespace vkgrad::fuzz {

struct Target {
  const char* name;  // also the folder of its stored inputs
  void (*run)(std::string_view bytes);
};

// safetensors, gpt_config, vit_config, vae_config, idx_images, idx_labels, edge_list, vocab,
// cli, npy, hf_folder, tokenizer_json and tokenizer_encode where the tokenizers are built
// (VKGRAD_WITH_TOKENIZERS), and onnx where the importer is (VKGRAD_WITH_ONNX).
std::span<const Target> targets();
const Target* findTarget(std::string_view name);

}  // namespace vkgrad::fuzz
