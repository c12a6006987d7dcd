#include "vkgrad/runtime/executor.h"

#include <algorithm>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/random.h"
#include "vkgrad/ops/reference/half.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/parameters.h"
#include "vkgrad/runtime/slicing.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/error.h"
#include "vkgrad/vk/recorder.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::graph {
namespace {

// A parameter of a planning store or a declared dataset: shapes without device memory.
void checkHasMemory(const TensorInfo& info) {
  const bool planned = (info.kind == TensorKind::Parameter && !info.parameter->buffer) ||
                       (info.kind == TensorKind::Dataset && !*info.dataset->buffer);
  if (planned)
    throw Error("executor: " + std::string(tensorKindName(info.kind)) + " " + info.name + " " +
                info.shape.str() +
                " has no device memory (a planning ParameterStore or a declared dataset, for "
                "estimates and dry runs); compile with allocated ones");
}

// A parameter whose store changed its format (ParameterStore::setStorage) after the graph took
// it: the kernels would read its bytes in the wrong format.
void checkStored(const TensorInfo& info) {
  if (info.kind != TensorKind::Parameter || info.dtype == info.parameter->dtype) return;
  throw Error("executor: parameter " + info.name + " " + info.shape.str() + " is stored in " +
              ops::dtypeName(info.parameter->dtype) + " but the graph reads it as " +
              ops::dtypeName(info.dtype) +
              ": call ParameterStore::setStorage before building the graph, and applyPrecision "
              "(any policy, fp32 too) after");
}

// "matmul (x (4,64), w (64,256) -> h (4,256))": a node and its tensors, for errors.
std::string nodeText(const Graph& g, const Node& node) {
  const auto list = [&](const std::vector<int>& ids) {
    std::string text;
    for (int id : ids)
      if (id >= 0)
        text += (text.empty() ? "" : ", ") + g.tensor(id).name + " " + g.tensor(id).shape.str();
    return text;
  };
  return std::string(opName(node.op)) + " (" + list(node.inputs) + " -> " + list(node.outputs) +
         ")";
}

}  // namespace

// Offsets in the arena and the state buffer: the device's storage and texel binding alignments
// (ops bind any multiple of 4 bytes, but aligned views need no skip and allow RGBA32F texel
// fetches).
uint64_t arenaAlignment(const vk::Context& context) {
  const vk::DeviceInfo& info = context.info();
  uint64_t a =
      std::max<uint64_t>({16, info.min_storage_offset_alignment, info.min_texel_offset_alignment});
  uint64_t pow2 = 1;
  while (pow2 < a) pow2 <<= 1;
  return pow2;
}

Executor::Executor(vk::Context& context, const Graph& graph, const CompileOptions& options)
    : context_(context), graph_(graph) {
  // The arena in chunks of at most one allocation (one chunk on most devices and models).
  const uint64_t align = arenaAlignment(context);
  const uint64_t most = context.info().max_allocation_bytes / align * align;
  plan_ = planGraph(graph, align, options.reuse_memory, most);
  const size_t n = graph.tensors().size();
  buffer_.assign(n, nullptr);
  offset_.assign(n, 0);

  // The arena in the plan's chunks, the state in its buffers; parameters and datasets are
  // read where their owners put them.
  const uint64_t chunk = plan_.memory.chunk_bytes, arena_bytes = plan_.memory.arena_bytes;
  const size_t chunks = !arena_bytes ? 0 : chunk ? (arena_bytes + chunk - 1) / chunk : 1;
  owned_.reserve(chunks + plan_.state_bytes.size());  // pointers into owned_ are kept
  for (size_t t = 0; t < n; ++t)
    if (graph.tensor(int(t)).root == int(t) && plan_.used[t])
      checkHasMemory(graph.tensor(int(t))), checkStored(graph.tensor(int(t)));
  for (size_t c = 0; c < chunks; ++c) {
    const uint64_t bytes = chunk ? std::min(chunk, arena_bytes - c * chunk) : arena_bytes;
    owned_.push_back(context.allocator().allocate(bytes, vk::Use::Activations));
  }
  const size_t first_state = owned_.size();
  for (const uint64_t bytes : plan_.state_bytes)
    owned_.push_back(context.allocator().allocate(bytes, vk::Use::GraphState));
  std::vector<size_t> owned_tensors;
  for (size_t t = 0; t < n; ++t) {
    const TensorInfo& info = graph.tensor(int(t));
    if (info.root != int(t) || !plan_.used[t]) continue;
    if (!isPersistent(info)) {
      const uint64_t at = uint64_t(plan_.offset[t]);
      buffer_[t] = &owned_[chunk ? at / chunk : 0];
      offset_[t] = chunk ? at % chunk : at;
    } else if (info.kind == TensorKind::Parameter) {
      buffer_[t] = info.parameter->buffer.get();
      offset_[t] = info.parameter->offset;
      pages_.push_back(info.parameter->buffer);
    } else if (info.kind == TensorKind::Dataset) {
      buffer_[t] = info.dataset->buffer.get();
      offset_[t] = info.dataset->offset;
    } else {
      buffer_[t] = &owned_[first_state + size_t(plan_.state_buffer[t])];
      offset_[t] = uint64_t(plan_.state_offset[t]);
      owned_tensors.push_back(t);
    }
  }
  for (size_t t = 0; t < n; ++t) {
    const size_t r = size_t(graph.tensor(int(t)).root);
    buffer_[t] = buffer_[r];
    offset_[t] = offset_[r] + graph.tensor(int(t)).offset;
  }
  timed_ = context.info().timestamp_valid_bits != 0;
  profiled_ = timed_ && options.profile;
  if (!owned_.empty()) {
    vk::Recorder rec(context);
    // Quiet NaNs: a kernel that reads arena bytes nothing wrote this step shows up in results.
    for (size_t c = 0; c < chunks; ++c) rec.fill(owned_[c], 0x7fc00000u);
    // State starts at zero unless the graph gives its words: optimizer moments have no host
    // copy (a large model's would be gigabytes of zeros).
    for (size_t b = first_state; b < owned_.size(); ++b) rec.fill(owned_[b], 0u);
    rec.submit();
  }
  for (size_t t : owned_tensors) {
    const std::vector<uint32_t>& data = graph.tensor(int(t)).data;
    if (!data.empty())
      context.staging().upload(*buffer_[t], offset_[t], data.data(), data.size() * 4);
  }
  record();
}

Executor::~Executor() = default;

void Executor::record() {
  stepped_ = false;
  next_piece_ = 0;
  for (Piece& piece : pieces_) piece.rec->wait();  // a piece may still run
  pieces_.clear();
  for (size_t i = 0; i < piece_starts_.size(); ++i) {
    const bool last = i + 1 == piece_starts_.size();
    recordPiece(piece_starts_[i], last ? plan_.order.size() : piece_starts_[i + 1], last);
  }
}

void Executor::recordPiece(size_t first, size_t end, bool last) {
  Piece& piece = pieces_.emplace_back();
  piece.rec = std::make_unique<vk::Recorder>(context_);
  vk::Recorder& rec = *piece.rec;
  if (timed_) piece.ts_begin = rec.timestamp();
  for (size_t i = first; i < end; ++i) {
    const int n = plan_.order[i];
    const Node& node = graph_.nodes()[size_t(n)];
    // An op's refusal (a tensor too large for one binding, say) names the node's tensors.
    if (const auto launch = node.def().launch) try {
        launch(Launch{rec, node,
                      [this](int id) { return id < 0 ? ops::TensorView{} : view(Tensor{id}); }});
      } catch (const VulkanError&) {
        throw;
      } catch (const ShapeError& e) {
        throw ShapeError(nodeText(graph_, node) + ": " + e.what());
      } catch (const Error& e) {
        throw Error(nodeText(graph_, node) + ": " + e.what());
      }
    if (profiled_) piece.node_ts.emplace_back(n, rec.timestamp());
  }
  // After every use in the step (forward and backward masks agree): the next replay draws anew.
  const bool advance = last && graph_.rngState() && plan_.used[size_t(graph_.rngState().id)];
  if (advance) ops::rngAdvance(rec, view(graph_.rngState()));
  if (last)  // what an app reads on another queue family (releaseAfterStep)
    for (const auto& [t, family] : releases_)
      rec.release(*view(t).buffer, view(t).offset, view(t).bytes(), family);
  // A profiled piece without the advance ends at its last node's timestamp.
  if (timed_)
    piece.ts_end = profiled_ && !advance && !piece.node_ts.empty() ? piece.node_ts.back().second
                                                                   : rec.timestamp();
}

void Executor::rerecord() {
  record();
}

void Executor::slice(int nodes) {
  if (nodes < 0) throw Error("Executor::slice: the nodes per piece must be >= 0");
  piece_starts_ = piecesByCount(graph_, plan_.order, nodes);
  record();
}

int Executor::sliceByCost(std::span<const NodeTime> costs, double ms) {
  if (!(ms > 0)) throw Error("Executor::sliceByCost: the budget must be > 0 ms");
  std::vector<double> node_cost(graph_.nodes().size(), -1.0);  // -1: none given
  for (const NodeTime& t : costs) node_cost.at(size_t(t.node)) = t.ms;
  piece_starts_ = piecesByCost(plan_.order, node_cost, ms);
  record();
  return pieces();
}

int Executor::sliceByTime(double ms) {
  const std::vector<NodeTime> times = profile();
  if (times.empty())
    throw Error(
        "Executor::sliceByTime: needs the node times of a step() (CompileOptions::profile "
        "on a device with timestamps)");
  return sliceByCost(times, ms);
}

bool Executor::submitPiece(std::span<const vk::SemaphoreWait> waits,
                           std::span<const vk::SemaphoreSignal> signals) {
  pieces_[next_piece_].rec->submitAsync(waits, signals);
  next_piece_ = (next_piece_ + 1) % pieces_.size();
  return next_piece_ == 0;
}

void Executor::step() {
  // The pieces in order, the last waited for; every piece's timestamps are read.
  for (Piece& piece : pieces_) piece.rec->submitAsync();
  for (Piece& piece : pieces_) piece.rec->readTimestamps();
  next_piece_ = 0;
  stepped_ = true;
}

uint64_t Executor::submit() {
  return submit({}, {});
}

uint64_t Executor::submit(std::span<const vk::SemaphoreWait> waits,
                          std::span<const vk::SemaphoreSignal> signals) {
  // The app's waits before the first piece, its signals after the last.
  uint64_t value = 0;
  for (size_t i = 0; i < pieces_.size(); ++i)
    value = pieces_[i].rec->submitAsync(
        i == 0 ? waits : std::span<const vk::SemaphoreWait>{},
        i + 1 == pieces_.size() ? signals : std::span<const vk::SemaphoreSignal>{});
  next_piece_ = 0;
  stepped_ = true;
  return value;
}

bool Executor::busy() const {
  // Submissions finish in order on the queue: the last one submitted is the last to finish.
  for (const Piece& piece : pieces_)
    if (piece.rec->busy()) return true;
  return false;
}

void Executor::wait() {
  for (Piece& piece : pieces_) piece.rec->wait();
}

double Executor::gpuMilliseconds() const {
  if (!timed_ || !stepped_) return 0.0;
  double ms = 0.0;
  for (const Piece& piece : pieces_) {
    if (!piece.rec->hasTimestamps()) return 0.0;
    ms += piece.rec->milliseconds(piece.ts_begin, piece.ts_end);
  }
  return ms;
}

std::vector<NodeTime> Executor::profile() const {
  if (!profiled_ || !stepped_) return {};
  std::vector<NodeTime> out;
  for (const Piece& piece : pieces_) {
    if (!piece.rec->hasTimestamps()) return {};
    uint32_t previous = piece.ts_begin;
    for (const auto& [node, at] : piece.node_ts) {
      out.push_back({node, piece.rec->milliseconds(previous, at)});
      previous = at;
    }
  }
  return out;
}

ops::TensorView Executor::view(Tensor t) const {
  const TensorInfo& info = graph_.tensor(t);
  if (!buffer_[size_t(t.id)])
    throw Error("executor: tensor " + info.name + " " + info.shape.str() +
                " is not used by the compiled graph");
  return ops::view(*buffer_[size_t(t.id)], info.shape, offset_[size_t(t.id)], info.dtype);
}

void Executor::checkInput(Tensor t, DType dtype, size_t count) const {
  const TensorInfo& info = graph_.tensor(t);
  if (info.kind != TensorKind::Input)
    throw Error("setInput: " + info.name + " is a " + tensorKindName(info.kind) + ", not an input");
  if (info.dtype != dtype || int64_t(count) != info.shape.numel())
    throw ShapeError("setInput: " + info.name + " is " + info.shape.str() + " " +
                     ops::dtypeName(info.dtype) + ", got " + std::to_string(count) + " " +
                     ops::dtypeName(dtype) + " values");
}

void Executor::setInput(Tensor t, std::span<const float> values) {
  checkInput(t, DType::F32, values.size());
  if (!buffer_[size_t(t.id)]) return;  // pruned: nothing reads it
  context_.staging().uploadAsync(*buffer_[size_t(t.id)], offset_[size_t(t.id)], values.data(),
                                 values.size_bytes());
}

void Executor::setInput(Tensor t, std::span<const uint32_t> values) {
  checkInput(t, DType::U32, values.size());
  if (!buffer_[size_t(t.id)]) return;
  context_.staging().uploadAsync(*buffer_[size_t(t.id)], offset_[size_t(t.id)], values.data(),
                                 values.size_bytes());
}

void Executor::setLearningRate(Tensor optimizer_state, float lr) {
  const TensorInfo& info = graph_.tensor(optimizer_state);
  if (info.kind != TensorKind::State || !(info.shape == Shape{8}))
    throw Error("setLearningRate: " + info.name + " is not an optimizer state");
  const ops::TensorView v = view(optimizer_state);
  context_.staging().uploadAsync(*v.buffer, v.offset, &lr, sizeof(lr));
}

void Executor::setState(Tensor t, std::span<const uint32_t> words) {
  const TensorInfo& info = graph_.tensor(t);
  if (info.kind != TensorKind::State)
    throw Error("setState: " + info.name + " is a " + tensorKindName(info.kind) + ", not a state");
  if (int64_t(words.size()) != info.shape.numel())
    throw ShapeError("setState: " + info.name + " is " + info.shape.str() + ", got " +
                     std::to_string(words.size()) + " words");
  if (!buffer_[size_t(t.id)]) return;  // pruned: nothing reads it
  const ops::TensorView v = view(t);
  context_.staging().upload(*v.buffer, v.offset, words.data(), words.size_bytes());
}

void Executor::checkKept(Tensor t) const {
  const TensorInfo& info = graph_.tensor(t);
  const TensorInfo& root = graph_.tensor(info.root);
  const bool output =
      std::find(graph_.outputs().begin(), graph_.outputs().end(), t.id) != graph_.outputs().end();
  if (!isPersistent(root) && !output)
    throw Error("executor: " + info.name + " is not kept after a step; markOutput() it");
}

void Executor::readInto(Tensor t, void* out, size_t bytes) {
  checkKept(t);
  const ops::TensorView v = view(t);
  context_.staging().download(*v.buffer, v.offset, out, bytes);
}

void Executor::releaseAfterStep(Tensor t, uint32_t family) {
  checkKept(t);
  if (!context_.concurrentFamilies().empty()) return;  // shared: nothing to transfer
  const TensorInfo& info = graph_.tensor(t);
  // Refused on one family too: an app learns there what a device with two would do.
  if (isPersistent(graph_.tensor(info.root)))
    throw Error("executor: " + info.name + " is persistent, read again by the engine: " +
                "share its buffer (ExternalDevice::concurrent_families), do not release it");
  const size_t families = context_.info().queue_families.size();
  if (family >= families)
    throw Error("executor: releasing " + info.name + " to queue family " + std::to_string(family) +
                " of " + context_.info().name + "'s " + std::to_string(families));
  const auto same = [&](const auto& r) { return r.first.id == t.id && r.second == family; };
  if (family == context_.queueFamily() || std::ranges::any_of(releases_, same)) return;
  releases_.emplace_back(t, family);
  record();
}

vk::BufferRange Executor::buffer(Tensor t) const {
  checkKept(t);
  const ops::TensorView v = view(t);
  return {v.buffer->handle(), v.buffer->offset() + v.offset, v.bytes()};
}

std::vector<float> Executor::read(Tensor t) {
  const TensorInfo& info = graph_.tensor(t);
  if (info.dtype == DType::F32 || info.dtype == DType::U32) {
    std::vector<float> out(size_t(info.shape.numel()));
    readInto(t, out.data(), out.size() * 4);
    return out;
  }
  std::vector<uint8_t> bytes(info.bytes());
  readInto(t, bytes.data(), bytes.size());
  return ops::ref::decode(info.dtype, bytes);
}

std::vector<uint32_t> Executor::readWords(Tensor t) {
  std::vector<uint32_t> out(size_t(graph_.tensor(t).shape.numel()));
  readInto(t, out.data(), out.size() * 4);
  return out;
}

uint32_t Executor::dispatchCount() const {
  uint32_t n = 0;
  for (const Piece& piece : pieces_) n += piece.rec->dispatchCount();
  return n;
}
uint32_t Executor::barrierCount() const {
  uint32_t n = 0;
  for (const Piece& piece : pieces_) n += piece.rec->barrierCount();
  return n;
}

}  // namespace vkgrad::graph
