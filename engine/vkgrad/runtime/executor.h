// Compiles a Graph once (plan, buffers, one recorded command buffer) and replays it every
// step. A step is one queue submission of the recording: host work per step does not depend
// on the number of nodes. For a frame loop, the step can be recorded in pieces instead
// (slice()), submitted one piece per frame (submitPiece()) so that a step longer than a
// frame's budget spreads over several frames; the dispatches and their order are the same,
// so the results are the same bits. Inputs are uploaded by the caller between steps (for training,
// only batch indices: datasets are uploaded once and gathered on the device); only the tensors
// asked for are read back.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "vkgrad/ops/tensor.h"
#include "vkgrad/runtime/graph.h"
#include "vkgrad/runtime/planner.h"

namespace vkgrad::vk {
class Context;
class Recorder;
struct BufferRange;  // vk/context.h, with the two below
struct SemaphoreWait;
struct SemaphoreSignal;
}  // namespace vkgrad::vk

namespace vkgrad::graph {

// Copies a whole array to a new device buffer, once (Graph::dataset reads it in place).
// Throws ShapeError when values does not hold shape.numel() elements.
Dataset uploadDataset(vk::Context& context, const std::string& name, const Shape& shape,
                      std::span<const float> values);
Dataset uploadDataset(vk::Context& context, const std::string& name, const Shape& shape,
                      std::span<const uint32_t> values);
// Every window of `length` consecutive values of a stream as the rows of a
// (size - length + 1, length) u32 dataset, stored once (row stride 1): the memory of the
// stream, not of its windows. Read it with Graph::gather. Throws ShapeError when the stream
// is shorter than one window.
Dataset uploadWindows(vk::Context& context, const std::string& name,
                      std::span<const uint32_t> stream, int64_t length);
// The Datasets the two calls above would make, shapes only: their buffer is an empty
// vk::Buffer, no device memory. Graphs read them like uploaded ones, memory estimates
// (training/memory_estimate.h) count what their upload would take, and an Executor refuses them.
// The same ShapeErrors as the uploads.
Dataset declareDataset(const std::string& name, const Shape& shape, DType dtype);
Dataset declareWindows(const std::string& name, int64_t stream_size, int64_t length);

// The alignment of every tensor in an Executor's arena and state buffer (a power of two): the
// device's storage and texel binding alignments, at least 16.
uint64_t arenaAlignment(const vk::Context& context);

struct CompileOptions {
  bool reuse_memory = true;  // false: every activation gets its own range (for comparisons)
  // A timestamp after every node, so profile() can say where a step's GPU time goes. Costs
  // one timestamp write per node; off for normal runs.
  bool profile = false;
};

// One node's share of a step: GPU time from the end of the node before it to its own end
// (its dispatches and the barriers in front of them).
struct NodeTime {
  int node = 0;  // index into Graph::nodes()
  double ms = 0.0;
};

class Executor {
 public:
  // The graph and the parameters' stores must outlive the executor, unchanged.
  // Throws Error (planning) or OutOfMemoryError (allocation) before recording anything.
  Executor(vk::Context& context, const Graph& graph, const CompileOptions& options = {});
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Copies a step's input (an Input tensor; f32 or u32 as declared) to the device. Returns
  // once the values are in the staging buffer (up to its 16 MiB); the device copy is queued
  // before the next step and does not wait for a step still running.
  void setInput(Tensor t, std::span<const float> values);
  void setInput(Tensor t, std::span<const uint32_t> values);
  // Rewrites the optimizer's learning rate (its state tensor, training/optimizer.h).
  void setLearningRate(Tensor optimizer_state, float lr);
  // Overwrites a State tensor (optimizer moments, the generator) with saved words, as read
  // by readWords() (f32 tensors as their bits). Throws ShapeError on a wrong count, Error for
  // a tensor of another kind.
  void setState(Tensor t, std::span<const uint32_t> words);

  // Runs the recording once and waits.
  void step();
  // Runs it without waiting: returns the submission's value on the Context's timeline
  // (vk::Context::timeline()), after waiting for the app's `waits` and signalling its
  // `signals`. At most one submission of this recording is in flight: submitting again
  // first waits for the last. Everything else that touches the device (setInput, read,
  // step) is ordered after it on the queue; reads wait for it. No timestamps or profile.
  uint64_t submit();
  uint64_t submit(std::span<const vk::SemaphoreWait> waits,
                  std::span<const vk::SemaphoreSignal> signals);
  bool busy() const;  // the last submission has not finished on the device
  void wait();        // blocks until it has
  // Discards the recording and records it again (what step() replays).
  void rerecord();

  // --- a step in pieces, for frame loops
  // Records the step as pieces of at most `nodes` launched nodes each, in plan order (0: one
  // piece, the default). step() and submit() still run the whole step (every piece, in
  // order); submitPiece() runs one piece at a time.
  void slice(int nodes);
  // Records it as pieces of at most `ms` each by the given node costs (profile()'s shape, any
  // order; a node not named joins the piece before it: runtime/slicing.h); a node costing more than
  // `ms` is a piece alone. Returns the number of pieces.
  int sliceByCost(std::span<const NodeTime> costs, double ms);
  // sliceByCost by the node times of the last step() (CompileOptions::profile; throws Error
  // without it, or before a step).
  int sliceByTime(double ms);
  int pieces() const { return int(pieces_.size()); }
  // Submits the next piece of the step without waiting (after the app's `waits`, signalling
  // its `signals`, as submit() does) and returns true when it was the step's last: the step
  // is complete once that piece finishes (busy(), wait()). Set inputs before a step's first
  // piece, and read results after its last. The pieces of one step are ordered on the queue
  // like everything else; no timestamps are read.
  bool submitPiece(std::span<const vk::SemaphoreWait> waits = {},
                   std::span<const vk::SemaphoreSignal> signals = {});
  // Which piece submitPiece() submits next (0: a step starts).
  int nextPiece() const { return int(next_piece_); }

  // A tensor's contents after the last step: persistent tensors and marked outputs only
  // (others may have been overwritten by later ones); throws Error otherwise. 16-bit tensors
  // (runtime/precision.h) come back widened to f32.
  std::vector<float> read(Tensor t);
  std::vector<uint32_t> readWords(Tensor t);  // the same for u32 tensors (ids)
  float readScalar(Tensor t) { return read(t).at(0); }
  // Where a tensor lives (for tests and for ops recorded by the caller).
  ops::TensorView view(Tensor t) const;
  // The same as a VkBuffer range, for an app's own shaders: persistent tensors (parameters,
  // state) and marked outputs only, like read(). Valid while this Executor lives; its
  // contents change with every step.
  vk::BufferRange buffer(Tensor t) const;
  // For an app that reads t on another queue family than the engine's (async compute, see
  // vk::ExternalDevice): every step from now on ends by releasing buffer(t) to `family`, and
  // the app acquires it (vk::acquireBarrier) before reading it. The engine takes the range
  // back without a transfer when the next step writes it anew, so only marked outputs may be
  // released (throws Error for a persistent tensor: parameters and state that the engine reads
  // again need buffers shared CONCURRENT), and read(t) after a released step is the app's
  // business. Nothing is recorded where `family` is the engine's own or buffers are concurrent
  // (the persistent refusal stands on one family too, unless buffers are concurrent).
  void releaseAfterStep(Tensor t, uint32_t family);

  const GraphPlan& plan() const { return plan_; }
  uint64_t arenaBytes() const { return plan_.memory.arena_bytes; }
  uint64_t naiveBytes() const { return plan_.memory.naive_bytes; }
  uint32_t dispatchCount() const;
  uint32_t barrierCount() const;
  // GPU time of the last step() from timestamps around the recording (the sum of its
  // pieces'); 0 before the first step (after a rerecord()) or where the queue has no
  // timestamps.
  double gpuMilliseconds() const;
  // With CompileOptions::profile, every launched node's time in the last step(), in plan
  // order; their sum is gpuMilliseconds() less the generator's advance. Empty otherwise, or
  // before the first step, or where the queue has no timestamps.
  std::vector<NodeTime> profile() const;

 private:
  // One command buffer of the step: the nodes [first, end) of the plan's order.
  struct Piece {
    std::unique_ptr<vk::Recorder> rec;
    uint32_t ts_begin = 0, ts_end = 0;
    std::vector<std::pair<int, uint32_t>> node_ts;  // with profiled_: node, timestamp after it
  };
  void record();
  void recordPiece(size_t first, size_t end, bool last);
  void checkInput(Tensor t, DType dtype, size_t count) const;
  void checkKept(Tensor t) const;  // persistent or a marked output: read()'s rule
  void readInto(Tensor t, void* out, size_t bytes);

  vk::Context& context_;
  const Graph& graph_;
  GraphPlan plan_;
  std::vector<vk::Buffer> owned_;  // the arena's chunks, then the state buffers
  // The parameters' pages, shared with their store, which refuses to pack them anew
  // (ParameterStore::setStorage) while a compiled graph reads them.
  std::vector<std::shared_ptr<vk::Buffer>> pages_;
  std::vector<const vk::Buffer*> buffer_;  // per tensor id (null: never used)
  std::vector<uint64_t> offset_;           // per tensor id, bytes into buffer_
  std::vector<Piece> pieces_;
  // Where each piece starts in the plan's order (the first at 0); one entry: no slicing.
  std::vector<size_t> piece_starts_{0};
  size_t next_piece_ = 0;                              // submitPiece()'s
  std::vector<std::pair<Tensor, uint32_t>> releases_;  // releaseAfterStep()'s, in call order
  bool timed_ = false, stepped_ = false, profiled_ = false;
};

}  // namespace vkgrad::graph
