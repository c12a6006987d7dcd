// Small random GPT-2 models written in the Hugging Face layout, for the tests of the folder
// reader (hf/) and of `vkgrad-gpt sample/eval` on such folders. The mapping from vkgrad's
// parameter names to GPT-2's is written out here again, apart from the reader's table, so a
// slip in either shows.
#pragma once

#include <filesystem>
#include <string>

#include "models/gpt_reference.h"
#include "vkgrad/gpt/gpt.h"
#include "vkgrad/io/json_io.h"
#include "vkgrad/ops/tensor.h"

namespace vkgrad::test {

class Rng;

struct Gpt2FolderOptions {
  bool prefix = true;         // names "transformer.wte.weight" (the hub's) or "wte.weight"
  bool mask_buffers = true;   // h.<i>.attn.bias and .masked_bias written too, as old files have
  bool tied_lm_head = false;  // a tied model's lm_head.weight written anyway (wte again)
  int shards = 1;             // > 1: model.safetensors.index.json and that many shards
  ops::DType dtype = ops::DType::F32;
  bool tokenizer_json = true;  // else vocab.json + merges.txt
};

// The model's GPT-2 config.json for c (tie_word_embeddings = c.tie_weights).
graph::Json gpt2ConfigJson(const gpt::GptConfig& c);
// Writes DIR/config.json, the weights (params by vkgrad's names, gptReferenceShapes) and the
// tokenizer of smallTokenizerSize() ids.
void writeGpt2Folder(const std::filesystem::path& dir, const gpt::GptConfig& c,
                     const NamedArrays& params, const Gpt2FolderOptions& options = {});
// Writes the small tokenizer (below) into dir: tokenizer.json, or vocab.json + merges.txt.
void writeSmallTokenizer(const std::filesystem::path& dir, bool tokenizer_json = true);
// Random parameters of c, each N(0, 0.3) (LayerNorm gains around 1).
NamedArrays randomGptParameters(const gpt::GptConfig& c, Rng& rng);
// Ids of the small tokenizer writeGpt2Folder writes (BPE trained on Debian's licence texts,
// and "<|endoftext|>"): a model's vocab must be at least this.
uint32_t smallTokenizerSize();

}  // namespace vkgrad::test
