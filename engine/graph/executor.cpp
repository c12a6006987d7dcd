#include "graph/executor.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <string>

#include "graph/parameters.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/cross_entropy.h"
#include "ops/elementwise.h"
#include "ops/embedding.h"
#include "ops/layernorm.h"
#include "ops/matmul.h"
#include "ops/optim.h"
#include "ops/random.h"
#include "ops/sampling.h"
#include "vk/context.h"
#include "vk/error.h"
#include "vk/recorder.h"
#include "vk/staging.h"

namespace vkgrad::graph {
namespace {

// Arena offsets: the device's storage and texel binding alignments (ops bind any multiple of
// 4 bytes, but aligned views need no skip and allow RGBA32F texel fetches).
uint64_t arenaAlignment(const vk::Context& context) {
  const vk::DeviceInfo& info = context.info();
  uint64_t a =
      std::max<uint64_t>({16, info.min_storage_offset_alignment, info.min_texel_offset_alignment});
  uint64_t pow2 = 1;
  while (pow2 < a) pow2 <<= 1;
  return pow2;
}

// One of attention's (B,T,H,D) operands. A fused node's q, k, v (and their gradients) are
// column blocks `part` of a (B,T,3*H*D) tensor, rows 3*H*D apart; o and dout are packed.
ops::AttentionTensor attentionOperand(ops::TensorView t, const Attrs& at, int part) {
  const int64_t h = at.heads, d = at.head_dim;
  ops::AttentionTensor a;
  a.view = t;
  a.view.shape = {t.shape[0], t.shape[1], h, d};
  if (at.fused && part >= 0) {
    a.view.offset += uint64_t(part * h * d) * 4;
    a.row_stride = 3 * h * d;
  }
  return a;
}

// How each node records its kernels: one case per OpKind. view(id) gives where tensor id
// lives (an empty view for -1).
void launch(vk::Recorder& rec, const Node& node, const std::function<ops::TensorView(int)>& view) {
  auto in = [&](size_t i) { return view(node.inputs.at(i)); };
  auto out = [&](size_t i) { return view(node.outputs.at(i)); };
  const Attrs& at = node.attrs;
  const ops::Write w = node.writes.empty() ? ops::Write::Overwrite : node.writes[0];
  switch (node.op) {
    case OpKind::Reshape:
    case OpKind::Slice:
      return;  // shares its input's bytes

    case OpKind::Gather: {
      // table (N, ...) -> rows (n, row) for ids (n). The kernel moves 32-bit words without
      // arithmetic, so u32 tables (labels) pass through it as f32 views, bits unchanged.
      ops::TensorView table = in(0), ids = in(1), rows = out(0);
      const int64_t row = table.shape.numel() / table.shape[0];
      table.shape = {table.shape[0], row};
      ids.shape = {ids.shape.numel()};
      rows.shape = {ids.shape[0], row};
      table.dtype = rows.dtype = DType::F32;
      ops::embedding(rec, ids, table, rows, in(2), at.row_stride);
      return;
    }
    case OpKind::GatherBackward: {
      // ids (...), dout (..., row), status -> dtable (V, ...), scratch
      ops::TensorView ids = in(0), dout = in(1), dtable = out(0);
      const int64_t row = dtable.shape.numel() / dtable.shape[0];
      ids.shape = {ids.shape.numel()};
      dout.shape = {ids.shape[0], row};
      dtable.shape = {dtable.shape[0], row};
      ops::embeddingBackward(rec, ids, dout, dtable, out(1), in(2), w);
      return;
    }
    case OpKind::ZeroFill: {
      const ops::TensorView o = out(0);
      rec.fill(*o.buffer, 0u, o.offset, o.bytes());
      return;
    }

    case OpKind::Matmul: {
      // a: (M,K), b: (K,N), bias: (N) -> c: (M,N) (or batched; transposes as flagged)
      const ops::TensorView bias = in(2);
      ops::MatmulOptions options{at.trans_a, at.trans_b, at.alpha};
      if (bias.buffer) options.bias = &bias;
      ops::matmul(rec, in(0), in(1), out(0), options);
      return;
    }
    case OpKind::MatmulBackward: {
      // inputs (a, b, dc); one gradient, of input `which`: 0 a, 1 b, 2 bias.
      const ops::TensorView grad = out(0);
      ops::MatmulGrads grads;
      (at.which == 0 ? grads.da : at.which == 1 ? grads.db : grads.dbias) = &grad;
      const ops::MatmulOptions forward{at.trans_a, at.trans_b, at.alpha};
      ops::matmulBackward(rec, in(0), in(1), in(2), grads, forward, w);
      return;
    }

    case OpKind::Add:
      ops::add(rec, in(0), in(1), out(0));
      return;
    case OpKind::AddBackward: {
      // dout (a's shape) -> da, or db summed over b's broadcast axes.
      const ops::TensorView none{};
      if (at.which == 0)
        ops::addBackward(rec, in(0), out(0), none, w, w);
      else
        ops::addBackward(rec, in(0), none, out(0), w, w);
      return;
    }

    case OpKind::Activation:
      ops::activation(rec, at.activation, in(0), out(0), at.param);
      return;
    case OpKind::ActivationBackward: {
      // inputs (x or y, whichever the kind's derivative reads; dy) -> dx
      const bool reads_x = ops::activationBackwardReadsX(at.activation);
      const ops::TensorView saved = in(0), none{};
      ops::activationBackward(rec, at.activation, reads_x ? saved : none, reads_x ? none : saved,
                              in(1), out(0), at.param, w);
      return;
    }

    case OpKind::LayerNorm:
      // x, gamma, beta -> y, mean (rows), rstd (rows)
      ops::layernorm(rec, in(0), in(1), in(2), out(0), out(1), out(2), at.param);
      return;
    case OpKind::LayerNormBackward:
      // x, gamma, mean, rstd, dy -> dx, dgamma?, dbeta?, scratch?
      // dx under its own mode; dgamma and dbeta share one (autograd's layernormRule).
      ops::layernormBackward(rec, in(0), in(1), in(2), in(3), in(4), out(0), out(1), out(2), out(3),
                             w, node.outputs[1] >= 0 ? node.writes[1] : node.writes[2]);
      return;

    case OpKind::CrossEntropy:
      // logits (...,C), targets (...), status (2) -> mean (1), row losses (...), saved
      ops::crossEntropy(rec, in(0), in(1), out(1), out(0), out(2), in(2));
      return;
    case OpKind::CrossEntropyBackward:
      // logits, targets, saved, dmean -> dlogits
      ops::crossEntropyBackward(rec, in(0), in(1), in(2), in(3), out(0), ops::kCrossEntropyNoIgnore,
                                w);
      return;

    case OpKind::Attention: {
      // q, k, v -> o, lse
      const ops::AttentionOptions options{at.causal, at.scale};
      ops::attention(rec, attentionOperand(in(0), at, 0), attentionOperand(in(1), at, 1),
                     attentionOperand(in(2), at, 2), attentionOperand(out(0), at, -1), out(1),
                     options);
      return;
    }
    case OpKind::AttentionBackward: {
      // q, k, v, o, lse, dout -> dq, dk, dv, scratch
      const ops::AttentionOptions options{at.causal, at.scale};
      ops::attentionBackward(rec, attentionOperand(in(0), at, 0), attentionOperand(in(1), at, 1),
                             attentionOperand(in(2), at, 2), attentionOperand(in(3), at, -1), in(4),
                             attentionOperand(in(5), at, -1), attentionOperand(out(0), at, 0),
                             attentionOperand(out(1), at, 1), attentionOperand(out(2), at, 2),
                             out(3), options, w);
      return;
    }

    case OpKind::Dropout:
      ops::dropout(rec, in(0), out(0), at.param, in(1), at.stream);
      return;
    case OpKind::DropoutBackward:
      ops::dropoutBackward(rec, in(0), out(0), at.param, in(1), at.stream, w);
      return;
    case OpKind::TopKWeights:
      ops::topKWeights(rec, in(0), out(0), at.sample);
      return;
    case OpKind::Categorical:
      ops::categorical(rec, in(0), out(0), in(1), at.stream);
      return;

    case OpKind::AdvanceStep:
      ops::advanceStep(rec, in(0));
      return;
    case OpKind::ClipGradNorm: {
      // grads..., scratch, norm, state: the clip factor goes to the state, not the grads
      std::vector<ops::TensorView> grads;
      for (size_t i = 0; i + 3 < node.inputs.size(); ++i) grads.push_back(in(i));
      const size_t n = node.inputs.size();
      ops::clipGradScale(rec, grads, at.param, in(n - 3), in(n - 2), in(n - 1));
      return;
    }
    case OpKind::SgdUpdate:
      ops::sgd(rec, in(0), in(1), in(2), in(3), at.sgd);
      return;
    case OpKind::AdamWUpdate:
      ops::adamw(rec, in(0), in(1), in(2), in(3), in(4), at.adamw);
      return;
  }
  throw Error(std::string("graph: no launch for ") + opName(node.op));
}

}  // namespace

namespace {

Dataset uploadWords(vk::Context& context, const std::string& name, const Shape& shape, DType dtype,
                    const void* values, size_t count) {
  if (shape.numel() <= 0 || int64_t(count) != shape.numel())
    throw ShapeError("dataset " + name + " " + shape.str() + ": got " + std::to_string(count) +
                     " values");
  Dataset d{name, shape, dtype, context.allocator().allocate(count * 4)};
  context.staging().upload(d.buffer, 0, values, count * 4);
  return d;
}

}  // namespace

Dataset uploadDataset(vk::Context& context, const std::string& name, const Shape& shape,
                      std::span<const float> values) {
  return uploadWords(context, name, shape, DType::F32, values.data(), values.size());
}

Dataset uploadDataset(vk::Context& context, const std::string& name, const Shape& shape,
                      std::span<const uint32_t> values) {
  return uploadWords(context, name, shape, DType::U32, values.data(), values.size());
}

Dataset uploadWindows(vk::Context& context, const std::string& name,
                      std::span<const uint32_t> stream, int64_t length) {
  const int64_t n = int64_t(stream.size());
  if (length <= 0 || n < length)
    throw ShapeError("dataset " + name + ": windows of " + std::to_string(length) +
                     " need a stream of at least that many values, got " + std::to_string(n));
  Dataset d = uploadWords(context, name, {n}, DType::U32, stream.data(), stream.size());
  d.shape = {n - length + 1, length};
  d.row_stride = 1;
  return d;
}

Executor::Executor(vk::Context& context, const Graph& graph, const CompileOptions& options)
    : context_(context), graph_(graph) {
  plan_ = planGraph(graph, arenaAlignment(context), options.reuse_memory);
  const size_t n = graph.tensors().size();
  buffer_.assign(n, nullptr);
  offset_.assign(n, 0);
  owned_.reserve(n + 1);  // pointers into owned_ are kept: no reallocation

  const vk::Buffer* arena = nullptr;
  if (plan_.memory.arena_bytes) {
    owned_.push_back(context.allocator().allocate(plan_.memory.arena_bytes));
    arena = &owned_.back();
  }
  for (size_t t = 0; t < n; ++t) {
    const TensorInfo& info = graph.tensor(int(t));
    if (info.root != int(t) || !plan_.used[t]) continue;
    if (!isPersistent(info)) {
      buffer_[t] = arena;
      offset_[t] = uint64_t(plan_.offset[t]);
    } else if (info.kind == TensorKind::Parameter) {
      buffer_[t] = &info.parameter->buffer;
    } else if (info.kind == TensorKind::Dataset) {
      buffer_[t] = &info.dataset->buffer;
    } else {
      owned_.push_back(context.allocator().allocate(info.bytes()));
      buffer_[t] = &owned_.back();
      if (!info.data.empty())
        context.staging().upload(owned_.back(), 0, info.data.data(), info.data.size() * 4);
    }
  }
  for (size_t t = 0; t < n; ++t) {
    const size_t r = size_t(graph.tensor(int(t)).root);
    buffer_[t] = buffer_[r];
    offset_[t] = offset_[r] + graph.tensor(int(t)).offset;
  }
  rec_ = std::make_unique<vk::Recorder>(context);
  timed_ = context.info().timestamp_valid_bits != 0;
  profiled_ = timed_ && options.profile;
  if (arena) {
    // Quiet NaNs: a kernel that reads arena bytes nothing wrote this step shows up in results.
    rec_->fill(*arena, 0x7fc00000u);
    rec_->submit();
    rec_->reset();
  }
  record();
}

Executor::~Executor() = default;

void Executor::record() {
  stepped_ = false;
  if (timed_) ts_begin_ = rec_->timestamp();
  node_ts_.clear();
  for (int n : plan_.order) {
    launch(*rec_, graph_.nodes()[size_t(n)],
           [this](int id) { return id < 0 ? ops::TensorView{} : view(Tensor{id}); });
    if (profiled_) node_ts_.emplace_back(n, rec_->timestamp());
  }
  // After every use in the step (forward and backward masks agree): the next replay draws anew.
  const bool advance = graph_.rngState() && plan_.used[size_t(graph_.rngState().id)];
  if (advance) ops::rngAdvance(*rec_, view(graph_.rngState()));
  // A profiled step without the advance ends at its last node's timestamp.
  if (timed_)
    ts_end_ =
        profiled_ && !advance && !node_ts_.empty() ? node_ts_.back().second : rec_->timestamp();
}

void Executor::rerecord() {
  rec_->reset();
  record();
}

void Executor::step() {
  rec_->submit();
  stepped_ = true;
}

double Executor::gpuMilliseconds() const {
  return timed_ && stepped_ ? rec_->milliseconds(ts_begin_, ts_end_) : 0.0;
}

std::vector<NodeTime> Executor::profile() const {
  if (!profiled_ || !stepped_) return {};
  std::vector<NodeTime> out;
  uint32_t previous = ts_begin_;
  for (const auto& [node, at] : node_ts_) {
    out.push_back({node, rec_->milliseconds(previous, at)});
    previous = at;
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
  context_.staging().upload(*buffer_[size_t(t.id)], 0, values.data(), values.size_bytes());
}

void Executor::setInput(Tensor t, std::span<const uint32_t> values) {
  checkInput(t, DType::U32, values.size());
  if (!buffer_[size_t(t.id)]) return;
  context_.staging().upload(*buffer_[size_t(t.id)], 0, values.data(), values.size_bytes());
}

void Executor::setLearningRate(Tensor optimizer_state, float lr) {
  const TensorInfo& info = graph_.tensor(optimizer_state);
  if (info.kind != TensorKind::State || !(info.shape == Shape{8}))
    throw Error("setLearningRate: " + info.name + " is not an optimizer state");
  const ops::TensorView v = view(optimizer_state);
  context_.staging().upload(*v.buffer, v.offset, &lr, sizeof(lr));
}

void Executor::readInto(Tensor t, void* out, size_t bytes) {
  const TensorInfo& info = graph_.tensor(t);
  const TensorInfo& root = graph_.tensor(info.root);
  const bool output =
      std::find(graph_.outputs().begin(), graph_.outputs().end(), t.id) != graph_.outputs().end();
  if (!isPersistent(root) && !output)
    throw Error("executor: " + info.name + " is not kept after a step; markOutput() it");
  const ops::TensorView v = view(t);
  context_.staging().download(*v.buffer, v.offset, out, bytes);
}

std::vector<float> Executor::read(Tensor t) {
  std::vector<float> out(size_t(graph_.tensor(t).shape.numel()));
  readInto(t, out.data(), out.size() * 4);
  return out;
}

std::vector<uint32_t> Executor::readWords(Tensor t) {
  std::vector<uint32_t> out(size_t(graph_.tensor(t).shape.numel()));
  readInto(t, out.data(), out.size() * 4);
  return out;
}

uint32_t Executor::dispatchCount() const {
  return rec_->dispatchCount();
}
uint32_t Executor::barrierCount() const {
  return rec_->barrierCount();
}

}  // namespace vkgrad::graph
