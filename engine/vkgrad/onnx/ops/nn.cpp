// The network ops: MatMul and Gemm onto the matmul kernels, Softmax, LayerNormalization,
// the reductions, Conv, pooling, BatchNormalization and Pad.
#include <cmath>

#include "vkgrad/onnx/node_context.h"
#include "vkgrad/ops/activation.h"
#include "vkgrad/ops/conv2d.h"
#include "vkgrad/ops/pad.h"
#include "vkgrad/ops/pool2d.h"

namespace vkgrad::onnx {
namespace {

void requireFloat(const NodeContext& c, int i) {
  if (!isFloatType(c.value(i).type))
    c.fail(std::string("input ") + std::to_string(i) + " is " + elemTypeName(c.value(i).type) +
           ", a float is required");
}

void matmul(NodeContext& c) {
  requireFloat(c, 0);
  requireFloat(c, 1);
  std::vector<int64_t> a = c.dims(0), b = c.dims(1);
  graph::Tensor ta = c.tensor(0), tb = c.tensor(1);
  // numpy's rules for vectors: a (K) is (1,K), b (K) is (K,1), the added axis dropped after.
  const bool a_vec = a.size() == 1, b_vec = b.size() == 1;
  if (a_vec) a.insert(a.begin(), 1), ta = c.g.reshape(ta, deviceShape(a));
  if (b_vec) b.push_back(1), tb = c.g.reshape(tb, deviceShape(b));
  if (a.size() < 2 || b.size() < 2) c.fail("scalars do not multiply as matrices");
  const int64_t k = a.back(), n = b.back();
  if (b[b.size() - 2] != k)
    c.fail(dimsText(c.dims(0)) + " x " + dimsText(c.dims(1)) + ": inner sizes differ");
  std::vector<int64_t> out;
  graph::Tensor y;
  if (b.size() == 2) {
    // Every row of a times one matrix: a single matmul over the rows, whatever a's rank.
    const int64_t rows = dimsNumel(a) / k;
    out.assign(a.begin(), a.end() - 1);
    out.push_back(n);
    y = c.g.matmul(c.g.reshape(ta, graph::Shape{rows, k}), tb);
  } else {
    const size_t rank = std::max(a.size(), b.size());
    for (size_t i = 0; i + 2 < rank; ++i) {
      const int64_t da = i + a.size() >= rank ? a[i + a.size() - rank] : 1;
      const int64_t db = i + b.size() >= rank ? b[i + b.size() - rank] : 1;
      if (da != db && da != 1 && db != 1) c.fail("batch axes do not broadcast");
      out.push_back(da == 1 ? db : da);
    }
    out.push_back(a[a.size() - 2]);
    out.push_back(n);
    y = c.g.batchMatmul(ta, tb);
  }
  if (a_vec) out.erase(out.end() - 2);
  if (b_vec) out.pop_back();
  c.setDevice(0, y, out);
}

// Y = alpha A' B' + beta C: the matmul with its bias epilogue where C is a row vector.
void gemm(NodeContext& c) {
  requireFloat(c, 0);
  requireFloat(c, 1);
  const bool ta = c.attrInt("transA", 0) != 0, tb = c.attrInt("transB", 0) != 0;
  const float alpha = c.attrFloat("alpha", 1.0f), beta = c.attrFloat("beta", 1.0f);
  const auto &a = c.dims(0), &b = c.dims(1);
  if (a.size() != 2 || b.size() != 2) c.fail("A and B must be matrices");
  const int64_t m = ta ? a[1] : a[0], n = tb ? b[0] : b[1];
  const bool has_c = c.has(2) && beta != 0.0f;
  const bool bias_epilogue = has_c && beta == 1.0f && c.dims(2) == std::vector<int64_t>{n};
  graph::Tensor y =
      c.g.matmul(c.tensor(0), c.tensor(1), bias_epilogue ? c.tensor(2) : graph::Tensor{}, ta, tb);
  if (alpha != 1.0f)
    y = c.g.mul(y, c.g.constant(c.node.output(0) + ".alpha", graph::Shape{1}, {alpha}));
  if (has_c && !bias_epilogue) {
    graph::Tensor bias = c.tensor(2);
    if (beta != 1.0f)
      bias = c.g.mul(bias, c.g.constant(c.node.output(0) + ".beta", graph::Shape{1}, {beta}));
    y = c.g.add(y, bias);
  }
  c.setDevice(0, y, std::vector<int64_t>{m, n});
}

template <bool Log>
void softmax(NodeContext& c) {
  requireFloat(c, 0);
  const int axis = c.axis(c.attrInt("axis", -1), c.rank(0));
  const graph::Tensor x = c.tensor(0);
  c.setDevice(0, Log ? c.g.logSoftmax(x, axis) : c.g.softmax(x, axis), c.dims(0));
}

// Normalised over the axes from `axis` on, which the kernel sees as one row.
void layerNorm(NodeContext& c) {
  requireFloat(c, 0);
  const auto& d = c.dims(0);
  const int axis = c.axis(c.attrInt("axis", -1), int(d.size()));
  int64_t inner = 1;
  for (size_t k = size_t(axis); k < d.size(); ++k) inner *= d[k];
  if (dimsNumel(c.dims(1)) != inner)
    c.fail("Scale " + dimsText(c.dims(1)) + " does not cover the normalised axes");
  graph::Tensor gamma = c.g.reshape(c.tensor(1), graph::Shape{inner});
  graph::Tensor beta = c.has(2) ? c.g.reshape(c.tensor(2), graph::Shape{inner})
                                : c.g.constant(c.node.output(0) + ".bias", graph::Shape{inner},
                                               std::vector<float>(size_t(inner), 0.0f));
  graph::Tensor x = c.tensor(0);
  const float eps = c.attrFloat("epsilon", 1e-5f);
  const int64_t outer = dimsNumel(d) / inner;
  if (axis != int(d.size()) - 1) x = c.g.reshape(x, graph::Shape{outer, inner});
  c.setDevice(0, c.g.layerNorm(x, gamma, beta, eps), d);
  // The optional Mean and InvStdDev outputs (the normalised axes kept as 1), from the
  // general ops: the layer-norm kernel keeps its own statistics for its backward pass.
  const bool mean_out = c.outputCount() > 1 && !c.node.output(1).empty();
  const bool rstd_out = c.outputCount() > 2 && !c.node.output(2).empty();
  if (!mean_out && !rstd_out) return;
  std::vector<int64_t> stat_dims(d.begin(), d.begin() + axis);
  stat_dims.resize(d.size(), 1);
  const graph::Tensor rows = c.g.reshape(c.tensor(0), graph::Shape{outer, inner});
  const graph::Tensor mean = c.g.mean(rows, {1}, true);
  if (mean_out) c.setDevice(1, mean, stat_dims);
  if (rstd_out) {
    const graph::Tensor diff = c.g.sub(rows, mean);
    const graph::Tensor var = c.g.mean(c.g.mul(diff, diff), {1}, true);
    const graph::Tensor eps_t = c.g.constant(c.node.output(2) + ".eps", graph::Shape{1}, {eps});
    c.setDevice(2, c.g.activation(c.g.add(var, eps_t), ops::Activation::Rsqrt), stat_dims);
  }
}

enum class Reduce { Sum, Mean, Max };

template <Reduce R>
void reduce(NodeContext& c) {
  requireFloat(c, 0);
  const auto& d = c.dims(0);
  // ReduceSum takes its axes as an input from opset 13; the others as an attribute to 17.
  std::vector<int64_t> axes = c.has(1) ? c.hostInts(1) : c.attrInts("axes");
  const bool keep = c.attrInt("keepdims", 1) != 0;
  if (axes.empty() && c.attrInt("noop_with_empty_axes", 0) != 0)
    return c.setDevice(0, c.tensor(0), d);
  std::vector<bool> reduced(d.size(), axes.empty());
  std::vector<int> list;
  for (int64_t a : axes) reduced[size_t(c.axis(a, int(d.size())))] = true;
  std::vector<int64_t> out;
  for (size_t k = 0; k < d.size(); ++k) {
    if (reduced[k]) list.push_back(int(k));
    if (!reduced[k])
      out.push_back(d[k]);
    else if (keep)
      out.push_back(1);
  }
  const graph::Tensor x = c.tensor(0);
  graph::Tensor y = R == Reduce::Sum    ? c.g.sum(x, list, true)
                    : R == Reduce::Mean ? c.g.mean(x, list, true)
                                        : c.g.max(x, list, true);
  c.setDevice(0, y, out);
}

// ONNX's pads [x1_begin, x2_begin, x1_end, x2_end] for two spatial axes, or auto_pad's.
std::array<int64_t, 4> spatialPads(const NodeContext& c, const std::vector<int64_t>& in,
                                   const std::vector<int64_t>& kernel,
                                   const std::vector<int64_t>& stride,
                                   const std::vector<int64_t>& dilation) {
  const std::string autopad = c.attrString("auto_pad", "NOTSET");
  std::array<int64_t, 4> p{0, 0, 0, 0};
  if (autopad == "NOTSET") {
    const auto pads = c.attrInts("pads", {0, 0, 0, 0});
    if (pads.size() != 4) c.fail("pads must have 4 values for 2-D");
    for (int k = 0; k < 4; ++k) p[size_t(k)] = pads[size_t(k)];
  } else if (autopad == "SAME_UPPER" || autopad == "SAME_LOWER") {
    for (int k = 0; k < 2; ++k) {
      const int64_t out = (in[size_t(k)] + stride[size_t(k)] - 1) / stride[size_t(k)];
      const int64_t total = std::max<int64_t>(0, (out - 1) * stride[size_t(k)] +
                                                     dilation[size_t(k)] * (kernel[size_t(k)] - 1) +
                                                     1 - in[size_t(k)]);
      const int64_t small = total / 2, big = total - small;
      p[size_t(k)] = autopad == "SAME_UPPER" ? small : big;
      p[size_t(k) + 2] = autopad == "SAME_UPPER" ? big : small;
    }
  } else if (autopad != "VALID") {
    c.fail("auto_pad " + autopad);
  }
  return p;
}

void conv(NodeContext& c) {
  requireFloat(c, 0);
  const auto &x = c.dims(0), &w = c.dims(1);
  if (x.size() != 4 || w.size() != 4) c.fail("2-D convolutions only (x and w of rank 4)");
  const auto kernel = c.attrInts("kernel_shape", {w[2], w[3]});
  const auto stride = c.attrInts("strides", {1, 1});
  const auto dilation = c.attrInts("dilations", {1, 1});
  if (kernel.size() != 2 || stride.size() != 2 || dilation.size() != 2)
    c.fail("kernel_shape, strides and dilations must have 2 values");
  const auto p = spatialPads(c, {x[2], x[3]}, kernel, stride, dilation);
  ops::Conv2dParams params;
  params.stride_h = stride[0], params.stride_w = stride[1];
  params.dilation_h = dilation[0], params.dilation_w = dilation[1];
  params.pad_top = p[0], params.pad_left = p[1], params.pad_bottom = p[2], params.pad_right = p[3];
  params.groups = c.attrInt("group", 1);
  const graph::Tensor bias = c.has(2) ? c.tensor(2) : graph::Tensor{};
  c.setDevice(0, c.g.conv2d(c.tensor(0), c.tensor(1), bias, params));
}

template <bool Max>
void pool(NodeContext& c) {
  requireFloat(c, 0);
  const auto& x = c.dims(0);
  if (x.size() != 4) c.fail("2-D pooling only (x of rank 4)");
  const auto kernel = c.attrInts("kernel_shape");
  const auto stride = c.attrInts("strides", {1, 1});
  if (kernel.size() != 2 || stride.size() != 2)
    c.fail("kernel_shape and strides must have 2 values");
  if (c.attrInt("ceil_mode", 0) != 0) c.fail("ceil_mode 1 is not supported");
  if (c.attrInts("dilations", {1, 1}) != std::vector<int64_t>{1, 1})
    c.fail("dilations are not supported");
  if (c.outputCount() > 1 && !c.node.output(1).empty())
    c.fail("the Indices output is not supported");
  const auto p = spatialPads(c, {x[2], x[3]}, kernel, stride, {1, 1});
  if (p[0] != p[2] || p[1] != p[3]) c.fail("asymmetric padding is not supported");
  ops::Pool2dParams params;
  params.kernel_h = kernel[0], params.kernel_w = kernel[1];
  params.stride_h = stride[0], params.stride_w = stride[1];
  params.pad_h = p[0], params.pad_w = p[1];
  params.count_include_pad = c.attrInt("count_include_pad", 0) != 0;
  const graph::Tensor t = c.tensor(0);
  c.setDevice(0, Max ? c.g.maxPool2d(t, params) : c.g.avgPool2d(t, params));
}

void globalAveragePool(NodeContext& c) {
  requireFloat(c, 0);
  if (c.rank(0) != 4) c.fail("x of rank 4 only");
  c.setDevice(0, c.g.globalAvgPool(c.tensor(0)));
}

// Running statistics are initializers: parameters the graph never trains. The graph's mode
// (Graph::setTraining) decides batch or running statistics, as PyTorch's train()/eval().
void batchNorm(NodeContext& c) {
  requireFloat(c, 0);
  const float eps = c.attrFloat("epsilon", 1e-5f);
  const float momentum = 1.0f - c.attrFloat("momentum", 0.9f);  // ONNX keeps, PyTorch adds
  // training_mode 0 (every eval export) normalises with the running statistics, 1 (a training
  // export) with the batch's, updating the running ones in place, whatever the graph's mode.
  const bool was_training = c.g.training();
  // (Before opset 14 there is no attribute: a node with the statistics outputs trains.)
  c.g.setTraining(c.hasAttr("training_mode") ? c.attrInt("training_mode", 0) != 0
                                             : c.outputCount() > 1);
  const graph::Tensor y =
      c.g.batchNorm(c.tensor(0), c.tensor(1), c.tensor(2), c.tensor(3), c.tensor(4), eps, momentum);
  c.g.setTraining(was_training);
  c.setDevice(0, y, c.dims(0));
  // A training export names the updated running statistics as outputs 1 and 2: the graph
  // updates them in place, so they are the running tensors themselves.
  if (c.outputCount() > 1) c.setDevice(1, c.tensor(3), c.dims(3));
  if (c.outputCount() > 2) c.setDevice(2, c.tensor(4), c.dims(4));
}

void pad(NodeContext& c) {
  requireFloat(c, 0);
  const auto& x = c.dims(0);
  const int r = int(x.size());
  const std::vector<int64_t> pads = c.hostInts(1);
  if (int(pads.size()) != 2 * r)
    c.fail("pads has " + std::to_string(pads.size()) + " values for rank " + std::to_string(r));
  if (c.has(3)) c.fail("the axes input is not supported");
  for (int k = 0; k < r; ++k) {
    if (pads[size_t(k)] < 0 || pads[size_t(k + r)] < 0)
      c.fail("negative pads (cropping) are not supported");
    if (k < r - 2 && (pads[size_t(k)] || pads[size_t(k + r)]))
      c.fail("padding is supported on the last two axes only");
  }
  ops::Padding p;
  const std::string mode = c.attrString("mode", "constant");
  if (mode == "reflect")
    p.mode = ops::PadMode::Reflect;
  else if (mode != "constant")
    c.fail("mode \"" + mode + "\" (constant and reflect are supported)");
  if (c.has(2)) p.value = float(c.host(2).at(0));
  p.left = pads[size_t(r - 1)], p.right = pads[size_t(2 * r - 1)];
  if (r >= 2) p.top = pads[size_t(r - 2)], p.bottom = pads[size_t(2 * r - 2)];
  c.setDevice(0, c.g.pad(c.tensor(0), p));
}

}  // namespace

void registerNnOps(OpTable& t) {
  t["MatMul"] = matmul;
  t["Gemm"] = gemm;
  t["Softmax"] = softmax<false>;
  t["LogSoftmax"] = softmax<true>;
  t["LayerNormalization"] = layerNorm;
  t["ReduceSum"] = reduce<Reduce::Sum>;
  t["ReduceMean"] = reduce<Reduce::Mean>;
  t["ReduceMax"] = reduce<Reduce::Max>;
  t["Conv"] = conv;
  t["MaxPool"] = pool<true>;
  t["AveragePool"] = pool<false>;
  t["GlobalAveragePool"] = globalAveragePool;
  t["BatchNormalization"] = batchNorm;
  t["Pad"] = pad;
}

}  // namespace vkgrad::onnx
