// The graph builder: a computation described once as nodes over tensor handles, checked for
// shapes as it is built (ShapeError naming the op and shapes), then differentiated
// (training/autograd.h), planned (runtime/planner.h) and executed (runtime/executor.h).
//
// Every tensor has exactly one root: itself, or (for a view: reshape, first-axis slice) the
// tensor whose bytes it shares, at a byte offset. Nodes run in the order they were added,
// which is a topological order because a node can only take tensors that already exist.
// Each op is defined once, in engine/vkgrad/runtime/ops/<op>.cpp (runtime/op.h), with its builder,
// slots, attributes, backward rule and launch. The builders below are the general vocabulary;
// one model's shortcut (patchify, spmm, gaussianKl, ...) is a free function declared beside
// its op file (runtime/ops/<op>.h) through the lower-level interface at the end of Graph.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "vkgrad/ops/activation.h"
#include "vkgrad/ops/tensor.h"
#include "vkgrad/runtime/op.h"

// Named by builders below; declared here so that this header does not include their op's
// header for one type (ops/sample.h, ops/pad.h, ops/conv2d.h, ops/pool2d.h define them).
namespace vkgrad::ops {
struct Padding;
struct SampleOptions;
struct Conv2dParams;
struct Pool2dParams;
enum class MapFn;  // ops/map_reduce.h
enum class Fold;
}  // namespace vkgrad::ops

namespace vkgrad::graph {

struct Parameter;

using ops::DType;
using ops::Shape;

// A device-resident array uploaded once (training inputs, labels: executor.h uploadDataset),
// read by graphs through Graph::dataset and gather(), so a step moves no data from the host.
// It must outlive every compiled graph that reads it.
struct Dataset {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  // Shared: keeps this header free of Vulkan, and lets datasets share one upload. An empty
  // vk::Buffer (no device memory) is a declared dataset (declareWindows): graphs and memory
  // estimates read its shape, an Executor refuses it.
  std::shared_ptr<vk::Buffer> buffer;
  // Elements from the start of one row (first axis) to the next; 0: dense rows. Below the
  // row size, rows overlap: uploadWindows stores a token stream once and serves every window
  // of it as a row. A strided dataset is read only through gather(), as its table.
  int64_t row_stride = 0;
  // Bytes into buffer where element 0 lies (a multiple of 4): a token stream's targets are
  // its ids one token on, in the same upload.
  uint64_t offset = 0;
  int64_t rowSize() const { return shape.numel() / shape[0]; }
  // Elements the rows span: (rows - 1) * stride + row size, or numel() when dense.
  int64_t extent() const {
    return row_stride > 0 ? (shape[0] - 1) * row_stride + rowSize() : shape.numel();
  }
};

// A handle: the index of a tensor in its Graph.
struct Tensor {
  int id = -1;
  explicit operator bool() const { return id >= 0; }
  bool operator==(const Tensor&) const = default;
};

// Where a tensor's bytes live and who provides its contents.
enum class TensorKind {
  Activation,  // produced by a node; planned into the arena
  Input,       // fed by the caller before each step; persistent
  Parameter,   // a ParameterStore entry; persistent, not owned by the graph
  Constant,    // uploaded once when compiled; persistent
  State,       // optimizer and status buffers, zeroed (or set) once; persistent
  Gradient,    // written by backward nodes; persistent for parameters, planned otherwise
  Dataset,     // a Dataset's buffer; persistent, not owned by the graph, never differentiable
};
const char* tensorKindName(TensorKind kind);

struct TensorInfo {
  std::string name;
  Shape shape;
  DType dtype = DType::F32;
  TensorKind kind = TensorKind::Activation;
  int root = -1;                         // itself, or the tensor a reshape view shares bytes with
  bool differentiable = true;            // false for ids, targets, masks, state
  bool persistent = false;               // a Gradient kept outside the arena (a parameter's)
  const Parameter* parameter = nullptr;  // Parameter kind
  std::vector<uint32_t> data;            // Constant and State: initial words (State: none, zeros)
  const Dataset* dataset = nullptr;      // Dataset kind
  uint64_t offset = 0;                   // bytes into the root's (a slice view's start)
  uint64_t bytes() const { return uint64_t(shape.numel()) * ops::dtypeBytes(dtype); }
};

class Graph {
 public:
  // --- leaves
  // Fed per step through Executor::setInput. Ids and targets are u32 and never differentiable.
  Tensor input(const std::string& name, const Shape& shape, DType dtype = DType::F32);
  // A trainable tensor of a ParameterStore (which must outlive the compiled graph); the same
  // tensor each time p is asked for. Not differentiable if p is frozen when first asked for.
  Tensor parameter(const Parameter& p);
  Tensor constant(const std::string& name, const Shape& shape, std::vector<float> values);
  // The same for u32 ids (gather's indices, where's conditions): never differentiable.
  Tensor constantIds(const std::string& name, const Shape& shape, std::vector<uint32_t> values);
  // A Dataset's array, read in place (not copied; never differentiable). A strided one
  // (windows) may only be gather()'s table. The same Dataset given again is the same tensor
  // (ops that read a graph's arrays, such as spmm and edgeSoftmax, share them).
  Tensor dataset(const Dataset& d);

  // --- ops (ShapeError naming the op and shapes on mismatch, nothing added)
  // a: (M,K) or (B,M,K), b: (K,N) or (B,K,N) (swapped where transposed), bias: (N) or none.
  Tensor matmul(Tensor a, Tensor b, Tensor bias = {}, bool trans_a = false, bool trans_b = false);
  // matmul(a, b, bias) + residual as one node, the residual shaped like the product: a
  // residual connection's x + proj(h) with no add pass (the Texel kernel adds it as it stores
  // the product, with the same bits as a separate add). The residual's gradient is the sum's.
  // trans_b: b is stored (N,K), as a PyTorch Linear's weight.
  Tensor matmulAdd(Tensor a, Tensor b, Tensor bias, Tensor residual, bool trans_b = false);
  // kind(matmul(a, b, bias)) as one node (an MLP's hidden layer): the Texel kernel applies the
  // activation as it stores the product (the bits of the separate pass) and stores the value
  // before it beside, which kind's backward reads; its reader's backward applies f' in its
  // own epilogue where it can (runtime/ops/fused_activation.h), as for the two-node form.
  Tensor matmulActivation(Tensor a, Tensor b, Tensor bias, ops::Activation kind,
                          float param = 0.0f, bool trans_b = false);
  // a + b with numpy-style broadcast (see ops/elementwise.h); the larger operand gives the shape.
  Tensor add(Tensor a, Tensor b);
  // a * b elementwise, broadcast as add().
  Tensor mul(Tensor a, Tensor b);
  Tensor activation(Tensor x, ops::Activation kind, float param = 0.0f);
  Tensor relu(Tensor x) { return activation(x, ops::Activation::Relu); }
  Tensor gelu(Tensor x) { return activation(x, ops::Activation::GeluTanh); }
  // numpy's matmul: a (..., M, K), b (..., K, N) of rank 2 to 4 (swapped where transposed),
  // the batch axes broadcast on both sides -> (batch..., M, N); reshapes around matmul().
  Tensor batchMatmul(Tensor a, Tensor b, bool trans_a = false, bool trans_b = false);
  // --- general ops, numpy's semantics (imported models): any rank up to 6; binary ops
  // broadcast on both sides (right-aligned; size-1 or missing axes repeated); axes may be
  // negative (from the end). Float tensors; f32 arithmetic. ShapeError naming op and shapes.
  // a - b, a / b, and any of add, sub, mul, div by ops::MapFn (add() and mul() above take
  // their fast kernels where b broadcasts one-sidedly, this kernel otherwise).
  Tensor sub(Tensor a, Tensor b);
  Tensor div(Tensor a, Tensor b);
  Tensor binary(ops::MapFn fn, Tensor a, Tensor b);
  // cond ? a : b, the three broadcast together; cond: u32, nonzero meaning true.
  Tensor where(Tensor cond, Tensor a, Tensor b);
  // x repeated to `shape` over its size-1 or missing axes (numpy's broadcast_to), stored.
  Tensor expand(Tensor x, const Shape& shape);
  // The sum, mean or maximum over `axes` (none: all), dropped or kept as size 1.
  Tensor sum(Tensor x, const std::vector<int>& axes = {}, bool keep_dims = false);
  Tensor mean(Tensor x, const std::vector<int>& axes = {}, bool keep_dims = false);
  Tensor max(Tensor x, const std::vector<int>& axes = {}, bool keep_dims = false);
  // y axis i = x axis perm[i]; any dtype.
  Tensor transpose(Tensor x, const std::vector<int>& perm);
  // Elements [begin, end) with a positive step along axis, Python's rules for negative and
  // out-of-range bounds; a first-axis slice with step 1 is slice()'s view. Any dtype.
  Tensor sliceAxis(Tensor x, int axis, int64_t begin, int64_t end, int64_t step = 1);
  // x cut along axis into pieces of these sizes (adding up to the axis).
  std::vector<Tensor> split(Tensor x, int axis, const std::vector<int64_t>& sizes);
  // Tensors of one rank and dtype, equal but along axis, joined along it.
  Tensor concat(const std::vector<Tensor>& xs, int axis);
  // Softmax and log-softmax along any axis (the last: the row kernels; another: transposed
  // there and back).
  Tensor softmax(Tensor x, int axis = -1);
  Tensor logSoftmax(Tensor x, int axis = -1);
  // The unary functions (neg, reciprocal, sqrt, rsqrt, exp, log, erf, tanh, sigmoid, relu,
  // the GELUs, silu, abs) are activation() kinds (ops/activation.h); pow by a constant too:
  Tensor pow(Tensor x, float exponent) { return activation(x, ops::Activation::Pow, exponent); }
  // x: (..., N), gamma, beta: (N).
  Tensor layerNorm(Tensor x, Tensor gamma, Tensor beta, float eps = 1e-5f);
  // Llama's RMSNorm (ops/rms_norm.h): x (..., N), gamma (N) -> x / sqrt(mean(x^2) + eps) * gamma.
  Tensor rmsNorm(Tensor x, Tensor gamma, float eps = 1e-6f);
  // Rotary position embedding, Hugging Face Llama's rotate_half form (ops/rope.h): x (B,T,H,D),
  // D even; row t sits at position t + offset, the offset 0 or read on the device from
  // position, a (1) u32 tensor (cached decoding). Gradient for x: the inverse rotation.
  Tensor rope(Tensor x, float theta = 10000.0f, Tensor position = {});
  // silu(gate) * up elementwise (ops/swiglu.h), gate and up of one shape; or from one gate_up
  // (..., 2F), gate the first F of each row and up the last F (one matmul for both) -> (..., F).
  Tensor swiglu(Tensor gate, Tensor up);
  Tensor swiglu(Tensor gate_up);
  // logits: (..., C) f32, targets: (...) u32 -> (1): the mean over rows of -log softmax[target].
  Tensor crossEntropy(Tensor logits, Tensor targets);
  // The same elements in another shape; no kernel, no copy.
  Tensor reshape(Tensor x, const Shape& shape);
  // x: (N, ...) -> rows [begin, end): (end - begin, ...); a view, no kernel, no copy.
  Tensor slice(Tensor x, int64_t begin, int64_t end);
  // table: (N, ...) f32 or u32, ids: (...) u32 -> (ids' dims..., table's dims after N), with
  // table's dtype: out[i] = table[ids[i]], copied on the device (ops/gather.h's kernel),
  // so a batch is an index buffer. An id >= N gives a zero row and sets the flags of a
  // status tensor (ops::kGatherBadId) that the step leaves on the device. A data table
  // (a Dataset, an input, u32) gets no gradient; an f32 table that depends on a parameter
  // (a trainable embedding) gets one through ops::gatherBackward's deterministic
  // scatter-add. Slices of either work at any offset.
  Tensor gather(Tensor table, Tensor ids);
  // numpy's take along any axis: x (..., N, ...) with N at `axis`, ids (...) u32 -> x's axes
  // before `axis`, ids' axes, x's axes after; gather() between transposes, with its gradient
  // and its treatment of ids >= N.
  Tensor gatherAxis(Tensor x, Tensor ids, int axis);
  // Indices as 64-bit (or 32-bit) integers, negative ones counting from the end, checked and
  // narrowed to the u32 ids the kernels take; ShapeError naming the first out of range.
  static std::vector<uint32_t> narrowIndices(std::span<const int64_t> ids, int64_t n);
  // Flash attention (ops/attention.h): q (B,Tq,H,D), k and v (B,Tk,Hkv,D) -> o (B,Tq,H,D),
  // softmax(scale q kᵀ [+ causal mask]) v per batch and head; scale 0 means 1/sqrt(D). Hkv
  // divides H (grouped-query attention: query head h reads key/value head h / (H / Hkv)). The
  // per-row log-sum-exp is a second output, saved for the backward pass.
  Tensor attention(Tensor q, Tensor k, Tensor v, bool causal = false, float scale = 0.0f);
  // The same from one fused QKV projection qkv (B,T,3*H*D) (q, k, v side by side in each
  // row, heads within each): q, k and v are strided views of it, read in place, and their
  // gradients land in one (B,T,3*H*D) gradient the same way. -> o (B,T,H*D).
  Tensor attention(Tensor qkv, int64_t heads, bool causal = false, float scale = 0.0f);
  // The same with kv_heads key/value heads (dividing heads): qkv (B,T,(H+2*Hkv)*D), each row
  // [H q heads | Hkv k heads | Hkv v heads]. causal has no default here, so a call with two
  // head counts never reads as the overload above.
  Tensor attention(Tensor qkv, int64_t heads, int64_t kv_heads, bool causal, float scale = 0.0f);
  // One step of causal attention for decoding over a key/value cache
  // (ops/cached_attention.h): qkv (B,R,3*H*D) as above, the R newest rows of a sequence;
  // k_cache, v_cache (B,rows,H*D): Input tensors (they persist between steps, so the host
  // never fills them); position: a (1) u32 tensor, the sequence position of qkv's first row.
  // Writes the new rows' keys and values into cache rows [position, position + R), then
  // returns (B,R,H*D): each new row attended over cache rows [0, its position]. The host
  // keeps position + R <= rows. Not differentiable; never pruned.
  Tensor cachedAttention(Tensor qkv, int64_t heads, Tensor k_cache, Tensor v_cache, Tensor position,
                         float scale = 0.0f);
  // The same with kv_heads key/value heads (dividing heads): qkv (B,R,(H+2*Hkv)*D) laid out
  // as attention's, caches (B,rows,Hkv*D) (grouped-query attention's smaller cache).
  Tensor cachedAttention(Tensor qkv, int64_t heads, int64_t kv_heads, Tensor k_cache,
                         Tensor v_cache, Tensor position, float scale = 0.0f);
  // Inverted dropout with probability p (0 <= p < 1) from the graph's on-device generator
  // (ops/random.h): a fresh mask every step (the executor advances the generator after each
  // step), the same mask in the step's backward pass. Returns x itself when p is 0 or the
  // graph is not for training (setTraining(false): evaluation graphs).
  Tensor dropout(Tensor x, float p);
  void setTraining(bool training) { training_ = training; }
  bool training() const { return training_; }
  // logits (..., V) f32 -> (...) u32: one id per row drawn from softmax(logits / temperature)
  // over the row's top_k largest logits (ops/sample.h), by the same generator as dropout,
  // so every step draws anew. Not differentiable. ShapeError / Error on bad arguments.
  Tensor sample(Tensor logits, const ops::SampleOptions& options);
  // Adds x into total in place on every step. total: an Input tensor of x's shape (f32) that
  // the host zeroes (Executor::setInput) and reads (Executor::read) after any number of
  // steps, so a sum over many batches comes back in one read. Not differentiable; never
  // pruned.
  void runningTotal(Tensor x, Tensor total);
  // --- convolutional networks, NCHW (ops/conv2d.h, ops/pool2d.h, ops/batch_norm.h, ops/pad.h)
  // x (N,C,...) f32 (an image batch (N,C,H,W), an MLP's (N,C)), gamma, beta (C) -> like x,
  // normalised per channel over N and the spatial axes. running_mean, running_var: (C) f32
  // persistent tensors, parameters that are never trained (a ParameterStore saves them with
  // the rest: name them "<prefix>.running_mean", "<prefix>.running_var" and start them at 0
  // and 1); the builder marks them non-differentiable. In a training graph the batch's
  // statistics normalise and the running ones are updated in place on the device every step
  // (momentum, the unbiased variance, as PyTorch): never pruned, and refused inside a
  // recomputed segment. In an evaluation graph (setTraining(false)) the running statistics
  // normalise. Gradients for x, gamma and beta either way.
  Tensor batchNorm(Tensor x, Tensor gamma, Tensor beta, Tensor running_mean, Tensor running_var,
                   float eps = 1e-5f, float momentum = 0.1f);
  // x (..., H, W) f32 of rank 1 to 4 -> (..., top + H + bottom, left + W + right): constant
  // or reflect padding (ops/pad.h).
  Tensor pad(Tensor x, const ops::Padding& padding);
  // x (N,C,H,W) f32 -> (N,C,1,1), each channel's mean over H and W (reshape to (N,C) for a
  // head: a view).
  Tensor globalAvgPool(Tensor x);
  // x (N,C,H,W) f32, w (O,C/groups,KH,KW), bias (O) or none -> (N,O,OH,OW), with the
  // params' stride, padding, dilation and groups. Gradients for x, w and bias.
  Tensor conv2d(Tensor x, Tensor w, Tensor bias, const ops::Conv2dParams& params);
  // x (N,C,H,W) -> (N,C,OH,OW): each window's maximum (the chosen pixel's index kept for the
  // backward), or its mean (params.count_include_pad). Gradients for x, deterministic.
  Tensor maxPool2d(Tensor x, const ops::Pool2dParams& params);
  Tensor avgPool2d(Tensor x, const ops::Pool2dParams& params);
  // --- activation recomputation
  // The nodes `block` adds form one segment (a transformer block, say) whose activations the
  // backward pass does not keep where recomputation is on (setRecompute): autograd adds the
  // segment's forward nodes again just before its gradients, reading what the segment read
  // (its input, parameters, the generator: the same dropout masks), so only those stay alive
  // from the forward pass to the backward and the arena holds one segment's activations at a
  // time. The results are the same bits; the step runs the segment's forward twice. Off (the
  // default), or in a graph not for training, it is block() alone. Segments do not nest.
  Tensor recomputed(const std::function<Tensor()>& block);
  void setRecompute(bool on) { recompute_ = on; }
  bool recompute() const { return recompute_; }
  struct Segment {
    int first = 0, end = 0;  // the nodes [first, end)
  };
  const std::vector<Segment>& segments() const { return segments_; }
  // The generator's seed; set it before the first dropout.
  void setSeed(uint64_t seed) { seed_ = seed; }
  // The generator's state tensor (4 u32 words), or an invalid handle when nothing draws.
  Tensor rngState() const { return Tensor{rng_}; }

  // --- outputs: kept alive to the end of a step so they can be read back
  void markOutput(Tensor t);
  const std::vector<int>& outputs() const { return outputs_; }

  // --- inspection and the lower-level interface autograd and the optimizer use
  const TensorInfo& tensor(Tensor t) const;
  const TensorInfo& tensor(int id) const { return tensors_.at(size_t(id)); }
  const Shape& shape(Tensor t) const { return tensor(t).shape; }
  const std::deque<TensorInfo>& tensors() const { return tensors_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  int producer(int tensor_id) const { return producers_.at(size_t(tensor_id)); }
  int newTensor(TensorInfo info);  // root defaults to itself
  // Throws Error when the node's slot counts are not its OpDef's.
  int addNode(Node node);  // sets the producer of outputs not yet produced
  // A node's output: a new activation tensor (differentiable unless said otherwise).
  int output(const Shape& shape, DType dtype = DType::F32, bool differentiable = true,
             const char* name = "");
  // A u32 status tensor (2 words, zeroed once) that a kernel sets flags in (bad ids, targets).
  int statusTensor(const char* name);
  // A view of x's bytes (reshape, slice): same root, `offset` more bytes in.
  int viewOf(Tensor x, const Shape& shape, uint64_t offset);
  // Stores a float tensor in another float format (runtime/precision.h); a view's byte offset
  // into its root is rescaled with it (it counts elements of the root's format).
  void setDtype(int tensor_id, DType dtype);
  // "matmul: (4,8) x (9,2)": op name and the shapes of the given tensors, for errors.
  std::string describe(const char* op, std::initializer_list<Tensor> ts) const;
  // Throws Error naming op when t is not a tensor of this graph: a builder's first check.
  void check(Tensor t, const char* op) const;
  // For a node that draws from the graph's generator (dropout, augment, reparameterize):
  // the generator's state tensor (created on first use) and a stream of the node's own.
  struct RandomStream {
    int rng = -1;
    uint32_t stream = 0;
  };
  RandomStream randomStream();

 private:
  // a op b for an op that commutes (add, mul): its own node where one operand broadcasts
  // one-sidedly over the other (the larger goes first and gives the shape), binary() otherwise.
  Tensor broadcastBinary(OpKind op, Tensor a, Tensor b);
  Tensor reduce(ops::Fold fold, bool mean, Tensor x, const std::vector<int>& axes, bool keep_dims);
  Tensor rowwise(OpKind op, Tensor x, int axis);  // softmax, logSoftmax
  // A deque: adding a tensor leaves references to the others valid, so a builder may hold
  // shape(x) (or be passed it: expand(x, shape(y))) across output(). A vector moved them.
  std::deque<TensorInfo> tensors_;
  std::vector<int> producers_;  // first node writing each tensor, -1 for leaves
  std::vector<Node> nodes_;
  std::vector<int> outputs_;
  bool training_ = true;
  uint64_t seed_ = 0;
  bool recompute_ = false, in_segment_ = false;
  std::vector<Segment> segments_;
  int generator();  // the rng state tensor, created on first use
  int rng_ = -1;
  uint32_t streams_ = 0;
};

}  // namespace vkgrad::graph
