#include "vkgrad/runtime/parameters.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "vkgrad/core/error.h"
#include "vkgrad/io/safetensors.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/convert.h"
#include "vkgrad/ops/random.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::graph {
namespace {

// fan_in + fan_out of a weight for Xavier initialisation.
double fanSum(const ops::Shape& shape) {
  if (shape.rank() == 1) return 2.0 * double(shape[0]);
  return double(shape[shape.rank() - 2]) + double(shape[shape.rank() - 1]);
}

}  // namespace

ParameterStore::ParameterStore(vk::Context& context, StoreMemory memory)
    : context_(context), memory_(memory) {}

void ParameterStore::checkDevice(const char* what) const {
  if (planning())
    throw Error(std::string("ParameterStore: ") + what + " needs device memory; this store (" +
                std::to_string(params_.size()) + " parameters, " + std::to_string(elements()) +
                " elements) is for planning only (StoreMemory::Planning)");
}

const Parameter& ParameterStore::add(const std::string& name, const ops::Shape& shape, Init init) {
  if (name.empty()) throw Error("ParameterStore: a parameter needs a name");
  if (find(name)) throw Error("ParameterStore: parameter \"" + name + "\" added twice");
  if (shape.rank() == 0 || shape.numel() == 0)
    throw Error("ParameterStore: parameter \"" + name + "\" has an empty shape " + shape.str());
  const ops::DType dtype = add_frozen_.value_or(ops::DType::F32);
  checkFits(name, shape, dtype);
  auto p = std::make_unique<Parameter>();
  p->name = name;
  p->shape = shape;
  p->init = init;
  p->frozen = add_frozen_.has_value();
  p->dtype = dtype;
  place(*p);
  index_.emplace(p->name, params_.size());
  params_.push_back(std::move(p));
  return *params_.back();
}

void ParameterStore::checkFits(const std::string& name, const ops::Shape& shape,
                               ops::DType dtype) const {
  // Every kernel binds a whole parameter: one larger than a storage binding can never run.
  // The size that counts is the stored one: a 16-bit parameter binds half an f32 one's bytes.
  const uint64_t bytes = uint64_t(shape.numel()) * ops::dtypeBytes(dtype);
  const std::string what = "ParameterStore: parameter \"" + name + "\" " + shape.str() + " is " +
                           std::to_string(bytes) + " bytes in " + ops::dtypeName(dtype);
  if (bytes > context_.info().max_storage_buffer_range)
    throw ShapeError(what + ", more than " + context_.info().name +
                     " can bind at once (maxStorageBufferRange " +
                     std::to_string(context_.info().max_storage_buffer_range) + " bytes)");
  if (const uint64_t most = context_.info().max_allocation_bytes; most && bytes > most)
    throw ShapeError(what + ", more than one allocation on " + context_.info().name +
                     " may be (maxMemoryAllocationSize " + std::to_string(most) + " bytes)");
}

void ParameterStore::setAddFrozen(std::optional<ops::DType> dtype) {
  if (dtype && !ops::isFloat(*dtype))
    throw Error(std::string("ParameterStore: setAddFrozen: parameters cannot be stored in ") +
                ops::dtypeName(*dtype) + " (f32, f16 or bf16)");
  add_frozen_ = dtype;
}

void ParameterStore::place(Parameter& p) {
  const uint64_t align = ops::bindingAlignment(context_);
  const uint64_t need = (p.bytes() + align - 1) / align * align;
  if (!planning() && (!page_ || !page_->grow(page_used_ + need))) {
    page_ = std::make_shared<vk::Buffer>(context_.allocator().allocate(need, vk::Use::Parameters));
    page_used_ = 0;
  }
  p.buffer = page_;
  p.offset = page_used_;
  page_used_ += need;
}

const Parameter* ParameterStore::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : params_[it->second].get();
}

const Parameter& ParameterStore::at(const std::string& name) const {
  if (const Parameter* p = find(name)) return *p;
  throw Error("ParameterStore: no parameter \"" + name + "\"");
}

int64_t ParameterStore::elements() const {
  int64_t n = 0;
  for (const auto& p : params_) n += p->shape.numel();
  return n;
}

namespace {

// A parameter the optimizer would update needs its f32 master: refuse to thaw a 16-bit one.
void checkThaw(const char* fn, const Parameter& p) {
  if (p.dtype != ops::DType::F32)
    throw Error(std::string("ParameterStore: ") + fn + ": \"" + p.name + "\" is stored in " +
                ops::dtypeName(p.dtype) +
                " and trains only from an f32 master: setStorage(name, DType::F32) first");
}

}  // namespace

void ParameterStore::setFrozen(const std::string& name, bool frozen) {
  const auto it = index_.find(name);
  if (it == index_.end()) throw Error("ParameterStore: setFrozen: no parameter \"" + name + "\"");
  if (!frozen) checkThaw("setFrozen", *params_[it->second]);
  params_[it->second]->frozen = frozen;
}

size_t ParameterStore::setFrozenPrefix(const std::string& prefix, bool frozen) {
  if (prefix.empty()) throw Error("ParameterStore: setFrozenPrefix: empty prefix");
  size_t count = 0;
  for (const auto& p : params_)
    if (p->name.starts_with(prefix)) {
      if (!frozen) checkThaw("setFrozenPrefix", *p);
      ++count;
    }
  if (count == 0)
    throw Error("ParameterStore: setFrozenPrefix: no parameter name starts with \"" + prefix +
                "\"");
  for (const auto& p : params_)
    if (p->name.starts_with(prefix)) p->frozen = frozen;
  return count;
}

namespace {

void checkStorage(const char* fn, const Parameter& p, ops::DType dtype) {
  if (!ops::isFloat(dtype))
    throw Error(std::string("ParameterStore: ") + fn + ": \"" + p.name + "\" cannot be stored in " +
                ops::dtypeName(dtype) + " (f32, f16 or bf16)");
  if (dtype != ops::DType::F32 && !p.frozen)
    throw Error(std::string("ParameterStore: ") + fn + ": \"" + p.name + "\" is trained: only a " +
                "frozen parameter may be stored in " + ops::dtypeName(dtype) +
                " (the optimizer updates f32 masters); setFrozen first");
}

}  // namespace

void ParameterStore::setStorage(const std::string& name, ops::DType dtype) {
  const auto it = index_.find(name);
  if (it == index_.end()) throw Error("ParameterStore: setStorage: no parameter \"" + name + "\"");
  checkStorage("setStorage", *params_[it->second], dtype);
  checkFits(name, params_[it->second]->shape, dtype);
  std::vector<ops::DType> dtypes;
  for (const auto& p : params_) dtypes.push_back(p->dtype);
  dtypes[it->second] = dtype;
  repack(dtypes);
}

size_t ParameterStore::setStoragePrefix(const std::string& prefix, ops::DType dtype) {
  if (prefix.empty()) throw Error("ParameterStore: setStoragePrefix: empty prefix");
  size_t count = 0;
  std::vector<ops::DType> dtypes;
  for (const auto& p : params_) {
    dtypes.push_back(p->dtype);
    if (!p->name.starts_with(prefix)) continue;
    checkStorage("setStoragePrefix", *p, dtype);
    checkFits(p->name, p->shape, dtype);
    dtypes.back() = dtype;
    ++count;
  }
  if (count == 0)
    throw Error("ParameterStore: setStoragePrefix: no parameter name starts with \"" + prefix +
                "\"");
  repack(dtypes);
  return count;
}

void ParameterStore::repack(const std::vector<ops::DType>& dtypes) {
  bool same = true;
  for (size_t i = 0; i < params_.size(); ++i) same &= params_[i]->dtype == dtypes[i];
  if (same) return;
  // An Executor shares the pages its graph reads: packing anew would leave it the old bytes.
  std::map<const vk::Buffer*, long> mine;  // the store's own references to each page
  for (const auto& p : params_)
    if (p->buffer) ++mine[p->buffer.get()];
  if (page_) ++mine[page_.get()];
  for (const auto& p : params_)
    if (p->buffer && p->buffer.use_count() > mine[p->buffer.get()])
      throw Error("ParameterStore: setStorage: a compiled graph (an Executor, a Trainer) reads \"" +
                  p->name + "\": change the storage before building it");
  // The old layout stays alive until its values are copied; with no values yet it goes first,
  // so that packing anew never needs both.
  std::vector<Parameter> old;
  if (filled_)
    for (const auto& p : params_) old.push_back(*p);
  for (const auto& p : params_) p->buffer.reset();
  page_.reset();
  page_used_ = 0;
  for (size_t i = 0; i < params_.size(); ++i) {
    params_[i]->dtype = dtypes[i];
    place(*params_[i]);
  }
  if (old.empty()) return;
  vk::Recorder rec(context_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Parameter& to = *params_[i];
    if (old[i].dtype == to.dtype)
      rec.copy(*old[i].buffer, old[i].offset, *to.buffer, to.offset, to.bytes());
    else
      ops::convert(rec, old[i].view(), to.view());  // rounds to nearest even, or widens
  }
  rec.submit();
}

int64_t ParameterStore::trainableElements() const {
  int64_t n = 0;
  for (const auto& p : params_)
    if (!p->frozen) n += p->shape.numel();
  return n;
}

uint64_t ParameterStore::deviceBytes() const {
  if (planning()) {
    const uint64_t align = context_.allocator().alignment();
    return (page_used_ + align - 1) / align * align;
  }
  uint64_t bytes = 0;
  const vk::Buffer* last = nullptr;  // parameters fill one page after another
  for (const auto& p : params_)
    if (p->buffer.get() != last) {
      last = p->buffer.get();
      bytes += last->capacity();
    }
  return bytes;
}

void ParameterStore::initialize(uint64_t seed) {
  checkDevice("initialize()");
  const vk::Buffer rng = context_.allocator().allocate(sizeof(ops::RngState));
  const ops::RngState state = ops::RngState::make(seed);
  context_.staging().upload(rng, 0, &state, sizeof(state));
  const ops::TensorView rng_view = ops::view(rng, {4}, 0, ops::DType::U32);
  // A 16-bit parameter draws into f32 scratch and is rounded from there, so that it holds the
  // f32 parameter's values rounded once. One scratch serves all: the recorder puts a barrier
  // between one parameter's conversion and the next one's draw.
  uint64_t scratch_bytes = 0;
  for (const auto& p : params_)
    if (p->dtype != ops::DType::F32)
      scratch_bytes = std::max(scratch_bytes, uint64_t(p->shape.numel()) * 4);
  std::optional<vk::Buffer> scratch;
  if (scratch_bytes) scratch.emplace(context_.allocator().allocate(scratch_bytes));
  vk::Recorder rec(context_);
  for (size_t i = 0; i < params_.size(); ++i) {
    const Parameter& p = *params_[i];
    const ops::TensorView out =
        p.dtype == ops::DType::F32 ? p.view() : ops::view(*scratch, p.shape);
    const uint32_t stream = uint32_t(i);
    float constant = 0.0f;
    bool drawn = true;
    switch (p.init.kind) {
      case Init::Kind::Zeros:
        constant = 0.0f, drawn = false;
        break;
      case Init::Kind::Ones:
        constant = 1.0f, drawn = false;
        break;
      case Init::Kind::Constant:
        constant = p.init.a, drawn = false;
        break;
      case Init::Kind::Uniform:
        ops::uniform(rec, out, p.init.a, p.init.b, rng_view, stream);
        break;
      case Init::Kind::Normal:
        ops::normal(rec, out, p.init.a, p.init.b, rng_view, stream);
        break;
      case Init::Kind::XavierUniform: {
        const float limit = float(std::sqrt(6.0 / fanSum(p.shape)));
        ops::uniform(rec, out, -limit, limit, rng_view, stream);
        break;
      }
      case Init::Kind::XavierNormal:
        ops::normal(rec, out, 0.0f, float(std::sqrt(2.0 / fanSum(p.shape))), rng_view, stream);
        break;
    }
    if (!drawn) {
      uint32_t word;
      std::memcpy(&word, &constant, 4);
      rec.fill(*out.buffer, word, out.offset, uint64_t(p.shape.numel()) * 4);
    }
    if (p.dtype != ops::DType::F32) ops::convert(rec, out, p.view());
  }
  rec.submit();
  filled_ = true;
}

std::vector<SavedTensor> ParameterStore::download() const {
  checkDevice("download() (or save())");
  std::vector<SavedTensor> out;
  for (const auto& p : params_) {
    SavedTensor t{p->name, p->dtype, savedDims(p->shape),
                  std::vector<uint32_t>(savedWords(p->dtype, uint64_t(p->shape.numel())))};
    context_.staging().download(*p->buffer, p->offset, t.data.data(), p->bytes());
    out.push_back(std::move(t));
  }
  return out;
}

void ParameterStore::save(const std::filesystem::path& path,
                          const std::map<std::string, std::string>& metadata,
                          std::optional<ops::DType> dtype) const {
  std::vector<SavedTensor> tensors = download();
  if (dtype)
    for (SavedTensor& t : tensors)
      if (t.dtype != *dtype) t = convertSaved(t, *dtype);
  saveSafetensors(path, Checkpoint{std::move(tensors), metadata});
}

std::map<std::string, std::string> ParameterStore::load(const std::filesystem::path& path) {
  checkDevice("load()");
  const Checkpoint checkpoint = loadSafetensors(path);
  std::vector<const SavedTensor*> tensors;
  for (const SavedTensor& t : checkpoint.tensors) tensors.push_back(&t);
  upload(tensors, path.string());
  return checkpoint.metadata;
}

void ParameterStore::upload(std::span<const SavedTensor* const> tensors,
                            const std::string& source) {
  checkDevice("upload() (or load())");
  // Check everything first; upload only tensors that match completely.
  std::string problems;
  std::vector<const SavedTensor*> from(params_.size(), nullptr);
  std::vector<SavedTensor> widened;  // 16-bit tensors as f32
  widened.reserve(tensors.size());
  std::vector<bool> given(params_.size(), false);
  for (const SavedTensor* t : tensors) {
    const auto it = index_.find(t->name);
    if (it == index_.end()) {
      problems += "\n  \"" + t->name + "\" is not a parameter of this model";
      continue;
    }
    const Parameter& p = *params_[it->second];
    if (given[it->second]) {
      problems += "\n  \"" + t->name + "\" is given twice";
      continue;
    }
    given[it->second] = true;
    if (!ops::isFloat(t->dtype) || t->shape != savedDims(p.shape)) {
      problems += "\n  \"" + t->name + "\": the file has " + ops::dtypeName(t->dtype) + " " +
                  dimsText(t->shape) + ", the model " + ops::dtypeName(p.dtype) + " " +
                  p.shape.str();
      continue;
    }
    // Checked as the file holds it (a value finite in f32 may round to inf in f16: caught
    // below), then in the parameter's format: widened exactly, or rounded once.
    if (const std::string bad = nonFiniteText(*t); !bad.empty()) {
      problems += "\n  \"" + t->name + "\" " + bad;
      continue;
    }
    if (t->dtype != p.dtype) {
      if (t->dtype != ops::DType::F32 && p.dtype != ops::DType::F32)
        widened.push_back(convertSaved(convertSaved(*t, ops::DType::F32), p.dtype));
      else
        widened.push_back(convertSaved(*t, p.dtype));
      t = &widened.back();
      if (const std::string bad = nonFiniteText(*t); !bad.empty()) {
        problems +=
            "\n  \"" + t->name + "\" " + bad + " once rounded to " + ops::dtypeName(p.dtype);
        continue;
      }
    }
    from[it->second] = t;
  }
  for (size_t i = 0; i < params_.size(); ++i)
    if (!given[i]) problems += "\n  \"" + params_[i]->name + "\" is missing from the file";
  if (!problems.empty())
    throw Error(source + ": does not match the model's parameters (nothing loaded):" + problems);
  for (size_t i = 0; i < params_.size(); ++i)
    context_.staging().upload(*params_[i]->buffer, params_[i]->offset, from[i]->data.data(),
                              params_[i]->bytes());
  filled_ = true;
}

}  // namespace vkgrad::graph
