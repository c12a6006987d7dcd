// Frozen parameters stored in 16 bits (ParameterStore::setStorage): a model whose frozen
// embedding table and first layer are kept in bf16 or f16 computes what the same model in f32
// computes with those parameters rounded to that format beforehand, trains its head as that
// model does, takes 2 bytes per stored element, saves and loads what it stores, and refuses
// misuse with Errors that say what to do.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "common/compare.h"
#include "common/device_tensor.h"
#include "common/error_text.h"
#include "common/process.h"
#include "common/random.h"
#include "common/vk_test.h"
#include "vkgrad/core/error.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/runtime/executor.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/runtime/precision.h"
#include "vkgrad/training/memory_estimate.h"
#include "vkgrad/training/trainer.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"

namespace vkgrad::test {
namespace {

using graph::Graph;
using graph::Init;
using graph::ParameterStore;
using graph::Tensor;
using ops::DType;

constexpr int64_t kRows = 61, kBatch = 15, kVocab = 11, kWidth = 9, kHidden = 13, kClasses = 3;

// ids -> table -> layer norm -> gelu(x W0 + b0) -> x W1 + b1: the table and layer 0 frozen
// (a pretrained backbone), the norm and layer 1 trained (a head).
void addModel(ParameterStore& store) {
  store.add("emb.table", {kVocab, kWidth}, Init::normal(0.0f, 1.0f));
  store.add("l0.w", {kWidth, kHidden}, Init::xavierUniform());
  store.add("l0.b", {kHidden}, Init::uniform(-0.3f, 0.3f));
  store.add("norm.gamma", {kWidth}, Init::uniform(0.8f, 1.2f));
  store.add("norm.beta", {kWidth}, Init::uniform(-0.1f, 0.1f));
  store.add("l1.w", {kHidden, kClasses}, Init::xavierUniform());
  store.add("l1.b", {kClasses}, Init::constant(0.05f));
}

const char* const kFrozen[] = {"emb.table", "l0.w", "l0.b"};
const char* const kTrained[] = {"norm.gamma", "norm.beta", "l1.w", "l1.b"};

void freeze(ParameterStore& store) {
  store.setFrozenPrefix("emb.", true);
  store.setFrozenPrefix("l0.", true);
}

Tensor logits(Graph& g, const ParameterStore& store, Tensor ids) {
  const auto p = [&](const char* name) { return g.parameter(store.at(name)); };
  Tensor h = g.gather(p("emb.table"), ids);
  h = g.layerNorm(h, p("norm.gamma"), p("norm.beta"));
  h = g.gelu(g.matmul(h, p("l0.w"), p("l0.b")));
  return g.matmul(h, p("l1.w"), p("l1.b"));
}

graph::LossFn modelLoss(const ParameterStore& store) {
  return [&store](Graph& g, std::span<const Tensor> batch) {
    return g.crossEntropy(logits(g, store, batch[0]), batch[1]);
  };
}

// The store's saved tensors with the frozen ones rounded to dtype on the host.
std::vector<graph::SavedTensor> rounded(const ParameterStore& store, DType dtype) {
  std::vector<graph::SavedTensor> tensors = store.download();
  for (graph::SavedTensor& t : tensors)
    if (store.at(t.name).frozen) t = graph::convertSaved(t, dtype);
  return tensors;
}

void uploadAll(ParameterStore& store, const std::vector<graph::SavedTensor>& tensors) {
  std::vector<const graph::SavedTensor*> ptrs;
  for (const graph::SavedTensor& t : tensors) ptrs.push_back(&t);
  store.upload(ptrs, "test");
}

const graph::SavedTensor& named(const std::vector<graph::SavedTensor>& ts, const std::string& n) {
  for (const graph::SavedTensor& t : ts)
    if (t.name == n) return t;
  throw Error("no tensor " + n);
}

// A fresh folder for a test's files, removed with them at the end.
struct TempDir {
  explicit TempDir(const std::string& name)
      : path(std::filesystem::temp_directory_path() /
             ("vkgrad-" + name + "-" + std::to_string(processId()))) {
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::filesystem::path path;
};

class StoredParametersMisuseTest : public VkTest {};

class StoredParametersTest : public VkTest, public ::testing::WithParamInterface<DType> {
 protected:
  void SetUp() override {
    VkTest::SetUp();
    std::vector<uint32_t> ids, labels;
    // Each id's label is a function of the id (a task the head can learn on any draw: with
    // labels drawn apart from the ids, repeated ids disagree and a seed's loss may not fall).
    for (int64_t i = 0; i < kRows; ++i)
      ids.push_back(rng_.below(kVocab)), labels.push_back(ids.back() % kClasses);
    ids_ = graph::uploadDataset(ctx(), "ids", {kRows}, ids);
    labels_ = graph::uploadDataset(ctx(), "labels", {kRows}, labels);
    for (int s = 0; s < kSteps; ++s)
      batches_.push_back(rng_.below(size_t(kBatch), uint32_t(kRows)));
  }

  // A store with the model, initialised from the test's seed, its backbone frozen; stored in
  // dtype (set before initialize() when `early`, converting no values, after it otherwise).
  void make(ParameterStore& store, DType dtype, bool early = false) {
    addModel(store);
    freeze(store);
    if (early && dtype != DType::F32) {
      EXPECT_EQ(store.setStoragePrefix("emb.", dtype), 1u);
      EXPECT_EQ(store.setStoragePrefix("l0.", dtype), 2u);
    }
    store.initialize(rng_.seed());
    if (!early && dtype != DType::F32) store.setStorage("emb.table", dtype);
    if (!early && dtype != DType::F32) store.setStoragePrefix("l0.", dtype);
  }

  // The model's logits for ids, as an inference graph reads the store.
  std::vector<float> infer(const ParameterStore& store, const std::vector<uint32_t>& ids) {
    Graph g;
    g.setTraining(false);
    const Tensor in = g.input("ids", {int64_t(ids.size())}, DType::U32);
    const Tensor out = logits(g, store, in);
    g.markOutput(out);
    graph::applyPrecision(g, graph::Precision::F32);
    graph::Executor exec(ctx(), g);
    exec.setInput(in, ids);
    exec.step();
    return exec.read(out);
  }

  graph::TrainerOptions options(graph::Precision precision) const {
    graph::TrainerOptions o;
    o.batch = kBatch;
    o.optimizer.adamw.weight_decay = 0.1f;
    o.schedule = graph::Schedule::constant(3e-2f);
    o.precision = precision;
    return o;
  }

  // The mean loss over the first rows (whole batches), the losses of kSteps steps on the same
  // batches, and that mean loss again.
  std::vector<float> train(ParameterStore& store, graph::Precision precision) {
    graph::Trainer trainer(ctx(), store, {&ids_, &labels_}, modelLoss(store), options(precision));
    std::vector<uint32_t> all;
    for (int64_t i = 0; i < kRows / kBatch * kBatch; ++i) all.push_back(uint32_t(i));
    std::vector<float> losses{trainer.evaluate(all)};
    for (const auto& batch : batches_) losses.push_back(*trainer.step(batch, true));
    losses.push_back(trainer.evaluate(all));
    return losses;
  }

  static constexpr int kSteps = 10;
  Rng rng_;
  graph::Dataset ids_, labels_;
  std::vector<std::vector<uint32_t>> batches_;
};

// The stored values are the f32 initial values rounded to nearest even once, whether the
// format was chosen before initialize() or after; the graph then reads them exactly as the
// f32 model reads the same values pre-rounded: the same logits up to the order of f32 sums,
// held to 1e-6 of their scale (the same bits on lavapipe; a GPU may pick another matmul
// variant for a 16-bit operand).
TEST_P(StoredParametersTest, InferLikeF32WithPreRoundedValues) {
  SCOPED_TRACE(rng_.describe());
  const DType dtype = GetParam();
  ParameterStore early(ctx()), late(ctx()), f32(ctx());
  make(early, dtype, true), make(late, dtype), make(f32, DType::F32);
  const std::vector<graph::SavedTensor> want = rounded(f32, dtype);
  for (const ParameterStore* store : {&early, &late}) {
    const std::vector<graph::SavedTensor> got = store->download();
    for (const char* name : kFrozen) {
      EXPECT_EQ(named(got, name).dtype, dtype) << name;
      EXPECT_EQ(named(got, name).data, named(want, name).data) << name << ": not rounded once";
      EXPECT_EQ(store->at(name).view().dtype, dtype);
    }
    for (const char* name : kTrained)
      EXPECT_EQ(named(got, name).data, named(want, name).data) << name << " changed";
  }
  uploadAll(f32, want);  // widened exactly: f32 masters holding the rounded values

  const std::vector<uint32_t> ids = rng_.below(size_t(37), kVocab);
  const std::vector<float> expected = infer(f32, ids);
  EXPECT_TRUE(allClose(infer(early, ids), expected, 1e-6)) << "early";
  EXPECT_TRUE(allClose(infer(late, ids), expected, 1e-6)) << "late";
}

// The head trains as it does on f32 masters of the pre-rounded backbone (losses within 1e-5
// relative: only the order of f32 sums may differ), the loss goes down, and the backbone's
// stored bits never change. Under a bf16 policy too, where activations are 16-bit as well.
TEST_P(StoredParametersTest, TrainTheHeadLikeF32WithPreRoundedValues) {
  SCOPED_TRACE(rng_.describe());
  const DType dtype = GetParam();
  for (const graph::Precision precision : {graph::Precision::F32, graph::Precision::BF16}) {
    SCOPED_TRACE(graph::precisionName(precision));
    ParameterStore stored(ctx()), f32(ctx());
    make(stored, dtype), make(f32, DType::F32);
    uploadAll(f32, rounded(f32, dtype));
    const std::vector<graph::SavedTensor> before = stored.download();

    const std::vector<float> got = train(stored, precision), want = train(f32, precision);
    EXPECT_LT(got.back(), 0.9f * got.front()) << "the head did not learn";
    // The same bits on lavapipe. Elsewhere a 16-bit weight may take another matmul variant
    // (another order of sums), and under bf16 each such difference is rounded to 2^-8.
    const double tolerance = precision == graph::Precision::F32 ? 1e-5 : 2e-3;
    EXPECT_TRUE(allClose(got, want, tolerance)) << "losses";
    const std::vector<graph::SavedTensor> after = stored.download(), reference = f32.download();
    for (const char* name : kFrozen)
      EXPECT_EQ(named(after, name).data, named(before, name).data) << name << " changed";
    for (const char* name : kTrained) {
      EXPECT_NE(named(after, name).data, named(before, name).data) << name << " did not train";
      EXPECT_EQ(named(after, name).dtype, DType::F32);
      EXPECT_TRUE(allClose(download(ctx(), stored.at(name).view()),
                           download(ctx(), f32.at(name).view()), tolerance))
          << name;
    }
  }
}

// Each stored element takes 2 bytes: the store's pages, its estimate and a trainer's estimate
// shrink by exactly the packing's difference; the optimizer's state is the frozen model's.
TEST_P(StoredParametersTest, TakeTwoBytesPerElement) {
  const DType dtype = GetParam();
  ParameterStore planned(ctx(), graph::StoreMemory::Planning),
      planned32(ctx(), graph::StoreMemory::Planning);
  addModel(planned), addModel(planned32);
  planned.add("emb.extra", {301, 257}, Init::normal(0, 1));  // > 64 KiB: a page of its own
  planned32.add("emb.extra", {301, 257}, Init::normal(0, 1));
  freeze(planned), freeze(planned32);
  EXPECT_EQ(planned.setStoragePrefix("emb.", dtype), 2u);
  planned.setStoragePrefix("l0.", dtype);
  const uint64_t align = ops::bindingAlignment(ctx()), page = ctx().allocator().alignment();
  const auto up = [](uint64_t n, uint64_t a) { return (n + a - 1) / a * a; };
  uint64_t packed = 0, packed32 = 0;
  for (const auto& p : planned.all()) {
    packed += up(uint64_t(p->shape.numel()) * (p->frozen ? 2 : 4), align);
    packed32 += up(uint64_t(p->shape.numel()) * 4, align);
  }
  EXPECT_EQ(planned.deviceBytes(), up(packed, page));
  EXPECT_EQ(planned32.deviceBytes(), up(packed32, page));
  EXPECT_LT(planned.deviceBytes(), planned32.deviceBytes());
  EXPECT_EQ(graph::estimateStore(planned).parameters, planned.deviceBytes());

  const graph::Dataset* datasets[] = {&ids_, &labels_};
  const graph::TrainerOptions o = options(graph::Precision::F32);
  const graph::MemoryEstimate half =
      graph::estimateTrainer(ctx(), planned, datasets, modelLoss(planned), o, true);
  const graph::MemoryEstimate full =
      graph::estimateTrainer(ctx(), planned32, datasets, modelLoss(planned32), o, true);
  EXPECT_EQ(full.parameters - half.parameters, planned32.deviceBytes() - planned.deviceBytes());
  EXPECT_EQ(half.gradients, full.gradients);
  EXPECT_EQ(half.optimizer, full.optimizer);

  // A device store allocates what the planning store says (one page here), and gives the
  // difference back to the allocator when the format changes after its values are set.
  ParameterStore device(ctx());
  addModel(device);
  device.add("emb.extra", {301, 257}, Init::normal(0, 1));
  freeze(device);
  device.initialize(3);
  const uint64_t in_use = ctx().allocator().bytesInUse(vk::Use::Parameters);
  device.setStoragePrefix("emb.", dtype);
  device.setStoragePrefix("l0.", dtype);
  EXPECT_EQ(device.deviceBytes(), planned.deviceBytes());
  EXPECT_EQ(in_use - ctx().allocator().bytesInUse(vk::Use::Parameters),
            planned32.deviceBytes() - planned.deviceBytes());
}

// save() writes what is stored (16-bit backbone, f32 head), or everything in f32 (widened
// exactly) when asked; load() of either into a store configured alike gives the same bits,
// and an f32 file of unrounded values loads rounded once, as setStorage rounds.
TEST_P(StoredParametersTest, SaveAndLoadWhatIsStored) {
  SCOPED_TRACE(rng_.describe());
  const DType dtype = GetParam();
  TempDir dir("StoredParametersTest");
  ParameterStore stored(ctx()), f32(ctx());
  make(stored, dtype), make(f32, DType::F32);
  const std::vector<graph::SavedTensor> want = stored.download();

  stored.save(dir.path / "as_stored.safetensors", {{"step", "3"}});
  stored.save(dir.path / "f32.safetensors", {}, DType::F32);
  f32.save(dir.path / "unrounded.safetensors");
  const graph::Checkpoint as_stored = graph::loadSafetensors(dir.path / "as_stored.safetensors");
  const graph::Checkpoint widened = graph::loadSafetensors(dir.path / "f32.safetensors");
  for (const char* name : kFrozen) {
    EXPECT_EQ(named(as_stored.tensors, name).dtype, dtype) << name;
    EXPECT_EQ(named(widened.tensors, name).dtype, DType::F32) << name;
    EXPECT_EQ(named(widened.tensors, name).data,
              graph::convertSaved(named(want, name), DType::F32).data)
        << name;
  }
  for (const char* name : kTrained) EXPECT_EQ(named(as_stored.tensors, name).dtype, DType::F32);

  for (const char* file : {"as_stored", "f32", "unrounded"}) {
    SCOPED_TRACE(file);
    ParameterStore loaded(ctx());
    addModel(loaded);
    freeze(loaded);
    loaded.setStoragePrefix("emb.", dtype);
    loaded.setStoragePrefix("l0.", dtype);
    const auto metadata = loaded.load(dir.path / (std::string(file) + ".safetensors"));
    if (file == std::string("as_stored")) {
      EXPECT_EQ(metadata.at("step"), "3");
    }
    const std::vector<graph::SavedTensor> got = loaded.download();
    for (const graph::SavedTensor& t : want) {
      EXPECT_EQ(named(got, t.name).dtype, t.dtype) << t.name;
      EXPECT_EQ(named(got, t.name).data, t.data) << t.name;
    }
  }
}

// Misuse is refused with an Error that says what to do, and leaves the store as it was.
TEST_F(StoredParametersMisuseTest, RefuseWhatWouldBreakTheContract) {
  ParameterStore store(ctx());
  addModel(store);
  store.initialize(5);
  const std::vector<graph::SavedTensor> initial = store.download();
  const auto has = [](const std::string& text, const std::string& part) {
    if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << "the error: " << text;
  };
  EXPECT_TRUE(
      has(errorText([&] { store.setStorage("l0.w", DType::BF16); }),
          "setStorage: \"l0.w\" is trained: only a frozen parameter may be stored in bf16"));
  EXPECT_TRUE(has(errorText([&] { store.setStorage("l9.w", DType::F16); }),
                  "setStorage: no parameter \"l9.w\""));
  EXPECT_TRUE(has(errorText([&] { store.setStoragePrefix("zz.", DType::F16); }),
                  "no parameter name starts with \"zz.\""));
  store.setFrozen("l0.w", true);
  // l0.b is not frozen: the whole prefix is refused, l0.w included.
  EXPECT_TRUE(
      has(errorText([&] { store.setStoragePrefix("l0.", DType::F16); }), "\"l0.b\" is trained"));
  EXPECT_EQ(store.at("l0.w").dtype, DType::F32);
  EXPECT_TRUE(
      has(errorText([&] { store.setStorage("l0.w", DType::U32); }), "cannot be stored in u32"));

  // A graph built before the format changed is refused when compiled; applyPrecision refuses
  // it too, as it trains emb.table (frozen after the graph took it).
  Graph before;
  const Tensor ids = before.input("ids", {4}, DType::U32);
  before.markOutput(logits(before, store, ids));
  store.setFrozen("emb.table", true);
  store.setStorage("emb.table", DType::F16);
  store.setStorage("l0.w", DType::F16);
  EXPECT_TRUE(has(errorText([&] { graph::Executor exec(ctx(), before); }),
                  "parameter emb.table (11,9) is stored in f16 but the graph reads it as f32"));
  EXPECT_TRUE(has(errorText([&] { graph::applyPrecision(before, graph::Precision::F32); }),
                  "applyPrecision: parameter emb.table is stored in f16 but this graph trains it"));

  // While a compiled graph reads the store, its pages stay where they are.
  {
    Graph g;
    const Tensor in = g.input("ids", {4}, DType::U32);
    g.markOutput(logits(g, store, in));
    graph::applyPrecision(g, graph::Precision::F32);
    graph::Executor exec(ctx(), g);
    EXPECT_TRUE(has(errorText([&] { store.setStorage("l0.w", DType::F32); }),
                    "a compiled graph (an Executor, a Trainer) reads \"emb.table\""));
    EXPECT_EQ(store.at("l0.w").dtype, DType::F16);
  }

  // A 16-bit parameter stays frozen until it is stored in f32 again (its value widened
  // exactly: the f16 rounding of the initial one).
  EXPECT_TRUE(has(errorText([&] { store.setFrozen("l0.w", false); }),
                  "setFrozen: \"l0.w\" is stored in f16 and trains only from an f32 master"));
  EXPECT_TRUE(has(errorText([&] { store.setFrozenPrefix("l0.", false); }),
                  "setFrozenPrefix: \"l0.w\" is stored in f16"));
  EXPECT_TRUE(store.at("l0.w").frozen);
  store.setStorage("l0.w", DType::F32);
  store.setFrozen("l0.w", false);
  const std::vector<graph::SavedTensor> now = store.download();
  EXPECT_EQ(named(now, "l0.w").data,
            graph::convertSaved(graph::convertSaved(named(initial, "l0.w"), DType::F16), DType::F32)
                .data);
  for (const char* name : {"l0.b", "l1.w"})
    EXPECT_EQ(named(now, name).data, named(initial, name).data) << name << " moved";
  EXPECT_EQ(named(now, "emb.table").data,
            graph::convertSaved(named(initial, "emb.table"), DType::F16).data);

  // A file whose value overflows the stored format is refused, naming it; nothing loads.
  TempDir dir("StoredParametersMisuseTest");
  std::vector<graph::SavedTensor> big = store.download();
  for (graph::SavedTensor& t : big)
    if (t.name == "emb.table") {
      t = graph::convertSaved(t, DType::F32);
      t.data[4] = 0x47800000u;  // 65536.0f: above f16's largest, 65504
    }
  graph::saveSafetensors(dir.path / "big.safetensors", {big, {}});
  EXPECT_TRUE(has(errorText([&] { store.load(dir.path / "big.safetensors"); }),
                  "\"emb.table\" holds inf at element 4 once rounded to f16"));
}

INSTANTIATE_TEST_SUITE_P(Formats, StoredParametersTest, ::testing::Values(DType::BF16, DType::F16),
                         [](const auto& info) { return std::string(ops::dtypeName(info.param)); });

}  // namespace
}  // namespace vkgrad::test
