// The parameter store: named, device-resident trainable tensors with their initialisers,
// saved to and loaded from safetensors checkpoints (io/safetensors.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/ops/tensor.h"

namespace vkgrad::graph {

// How a parameter starts. For Xavier, fan_in and fan_out are the last two dims (a weight
// (in, out) used as x·W), or both the only dim of a vector.
struct Init {
  enum class Kind { Zeros, Ones, Constant, Uniform, Normal, XavierUniform, XavierNormal };
  Kind kind = Kind::Zeros;
  float a = 0.0f, b = 0.0f;  // Constant: a; Uniform: [a, b); Normal: mean a, stddev b

  static Init zeros() { return {Kind::Zeros}; }
  static Init ones() { return {Kind::Ones}; }
  static Init constant(float value) { return {Kind::Constant, value}; }
  static Init uniform(float lo, float hi) { return {Kind::Uniform, lo, hi}; }
  static Init normal(float mean, float stddev) { return {Kind::Normal, mean, stddev}; }
  static Init xavierUniform() { return {Kind::XavierUniform}; }
  static Init xavierNormal() { return {Kind::XavierNormal}; }
};

struct Parameter {
  std::string name;
  ops::Shape shape;
  Init init;
  // The store's page this parameter lies in, from `offset` bytes on (shared: keeps this header
  // free of Vulkan). Null in a planning store.
  std::shared_ptr<vk::Buffer> buffer;
  uint64_t offset = 0;
  // Read but not trained (ParameterStore::setFrozen): no gradient, no optimizer state.
  bool frozen = false;
  // The format its values are stored in: F32, or F16/BF16 for a frozen one
  // (ParameterStore::setStorage), half the bytes.
  ops::DType dtype = ops::DType::F32;
  uint64_t bytes() const { return uint64_t(shape.numel()) * ops::dtypeBytes(dtype); }
  ops::TensorView view() const {
    if (!buffer)
      throw Error("parameter \"" + name +
                  "\" belongs to a planning ParameterStore: no device memory");
    return ops::view(*buffer, shape, offset, dtype);
  }
};

// Where a store's parameters live. A Planning store checks and packs them as a Device one
// does, without allocating: a model of any size can be declared to estimate its memory
// (training/memory_estimate.h) before any of it is spent. Anything that would touch its values
// (initialize, save, load, download, upload, an Executor) throws Error.
enum class StoreMemory { Device, Planning };

// Parameters are packed one after another into as few buffers (pages) as the allocator
// allows, each on the device's binding alignment: a page grows in place while the memory after
// it is free (vk::Buffer::grow), and the optimizer updates a page's parameters in one dispatch
// (ops::adamwMany).
class ParameterStore {
 public:
  explicit ParameterStore(vk::Context& context, StoreMemory memory = StoreMemory::Device);
  bool planning() const { return memory_ == StoreMemory::Planning; }

  // Throws Error on a duplicate or empty name or an empty shape, ShapeError naming it when it
  // is larger, in the format it is stored in, than one storage binding (maxStorageBufferRange)
  // or allocation may be; OutOfMemoryError when the device is full. Contents are undefined
  // until initialize() or load().
  const Parameter& add(const std::string& name, const ops::Shape& shape, Init init);
  // While set, add() declares each parameter frozen and stored in `dtype` (F32, F16 or BF16)
  // from the start, as setFrozen and setStorage would after it, but checked against the device's
  // limits at the size it is stored in and never placed in f32 first: a pretrained model's
  // token table, too large for a binding in f32 but not in 16 bits, can be loaded for
  // inference or a frozen base (hf/model.h). nullopt (the default) adds trained f32 ones.
  // Throws Error on a dtype that is not a float format.
  void setAddFrozen(std::optional<ops::DType> dtype);
  const Parameter* find(const std::string& name) const;
  const Parameter& at(const std::string& name) const;  // throws Error naming the missing one
  const std::vector<std::unique_ptr<Parameter>>& all() const { return params_; }
  int64_t elements() const;

  // Frozen parameters are read but not trained, as a pretrained backbone is while a new head
  // fine-tunes: a graph that takes one (Graph::parameter) treats it as a constant, so autograd
  // gives it no gradient and the optimizer neither updates it nor allocates moments for it.
  // A graph sees the flag as it was when the graph took the parameter: change it before
  // building a Trainer. Saved and loaded like any parameter. setFrozen throws Error naming an
  // unknown name; setFrozenPrefix changes every parameter whose name starts with prefix
  // ("encoder.") and returns how many, throwing Error when none does (or prefix is empty).
  // Unfreezing a parameter stored in 16 bits throws Error (nothing changed): store it in f32
  // first (setStorage), so that the optimizer has an f32 master to update.
  void setFrozen(const std::string& name, bool frozen);
  size_t setFrozenPrefix(const std::string& prefix, bool frozen);
  int64_t trainableElements() const;  // of the parameters not frozen

  // Storage: a frozen parameter may be stored in F16 or BF16, half the memory (a pretrained
  // backbone frozen while a head fine-tunes; inference of an imported model, every parameter
  // frozen). Its value becomes the f32 value rounded to nearest even once; F32 widens it back
  // exactly. Trained parameters stay f32 masters (the optimizer updates f32 from f32
  // gradients), so a parameter that is not frozen is refused. A store-wide choice rather
  // than a precision policy's (runtime/precision.h): every graph that reads the parameter
  // (training, evaluation, generation) binds the same bytes, under any policy, fp32 too.
  // Kernels read 16-bit parameters into f32 as they read 16-bit activations; applyPrecision
  // gives a graph's parameter tensors their stored format, and an Executor refuses a graph
  // built before a change (call these before building graphs, as setFrozen). Inference
  // stores a whole model so: setFrozen then setStorage on each of all(). Two kernels take f32
  // only, and an Executor refuses their graph naming the op before any GPU work: conv2d's
  // weights and batchNorm's running statistics (which a training graph also updates).
  // The parameters are packed anew (deviceBytes shrinks by 2 bytes per element stored in 16
  // bits), their values kept (converted on the device); before initialize() or load() there
  // is nothing to convert. setStorage throws Error naming an unknown name, a dtype that is
  // not a float format, a parameter that is not frozen, or a parameter that a live Executor
  // (a Trainer) reads while the format changes; setStoragePrefix changes every
  // parameter whose name starts with prefix and returns how many (Error when none does, the
  // prefix is empty or any of them is refused: then nothing changes).
  void setStorage(const std::string& name, ops::DType dtype);
  size_t setStoragePrefix(const std::string& prefix, ops::DType dtype);
  // The device memory the parameters take (vk::Use::Parameters): the pages' allocations, or
  // for a planning store one page holding them all. A device store spread over several pages
  // takes up to one allocator alignment more per page than the planning store says.
  uint64_t deviceBytes() const;

  // Runs every initialiser on the device; the i-th parameter added draws from stream i of
  // the counter-based generator (ops/random.h) seeded with `seed`, so the same seed gives the
  // same bits on a device, and adding a parameter leaves the earlier ones' values alone.
  // A parameter stored in 16 bits gets the f32 draw rounded to nearest even.
  void initialize(uint64_t seed);

  // Writes every parameter (and the metadata) to path; see saveSafetensors. Without dtype,
  // each as it is stored (f32, or its 16-bit format); F32 writes them all in f32 (16-bit ones
  // widened exactly); F16 or BF16 writes them rounded to that format: a half-size file for
  // inference (the f32 masters stay as they are; one stored in the other 16-bit format is
  // rounded from its stored value).
  void save(const std::filesystem::path& path,
            const std::map<std::string, std::string>& metadata = {},
            std::optional<ops::DType> dtype = std::nullopt) const;
  // Reads path and, only if it holds exactly this store's names with the same shapes (f32,
  // or f16/bf16, widened exactly) and only finite values, uploads them; otherwise throws
  // Error listing the differences (or the first NaN or inf of each tensor), with every
  // parameter left as it was. A parameter stored in 16 bits takes the file's value rounded
  // to nearest even once (exact when the file holds its format; a value that overflows the
  // format is refused as inf). Returns the file's metadata.
  std::map<std::string, std::string> load(const std::filesystem::path& path);

  // save() and load() without the file: every parameter downloaded as it is stored, in the
  // order added; and the same checks and upload from tensors read elsewhere (`source` names
  // them in errors).
  std::vector<SavedTensor> download() const;
  void upload(std::span<const SavedTensor* const> tensors, const std::string& source);

 private:
  void checkDevice(const char* what) const;  // Error on a planning store
  // ShapeError naming `name` when it takes more than a binding or an allocation in dtype.
  void checkFits(const std::string& name, const ops::Shape& shape, ops::DType dtype) const;
  // Lays p out after the parameters placed before it (add, repack).
  void place(Parameter& p);
  // Stores parameter i in dtypes[i], packing every parameter anew and keeping the values.
  void repack(const std::vector<ops::DType>& dtypes);

  vk::Context& context_;
  StoreMemory memory_;
  std::vector<std::unique_ptr<Parameter>> params_;  // in the order added
  std::unordered_map<std::string, size_t> index_;   // name -> position in params_
  std::shared_ptr<vk::Buffer> page_;                // the page parameters are added to
  uint64_t page_used_ = 0;  // bytes of it taken (a planning store: of its one virtual page)
  bool filled_ = false;     // initialize() or an upload has given the parameters values
  std::optional<ops::DType> add_frozen_;  // setAddFrozen
};

}  // namespace vkgrad::graph
