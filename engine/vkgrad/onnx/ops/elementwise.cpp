// Elementwise ops: the binary arithmetic (numpy broadcasting), comparisons, Where, the unary
// functions, Cast and the identities. Values known on the host are computed there (shape
// arithmetic), floats in f32 as the device would, integers in int64.
#include <cmath>
#include <functional>

#include "vkgrad/onnx/node_context.h"
#include "vkgrad/ops/activation.h"
#include "vkgrad/ops/map_reduce.h"

namespace vkgrad::onnx {
namespace {

// The flat index into a tensor of `dims` that element `i` of `out` (the broadcast shape) reads.
int64_t sourceIndex(int64_t i, const std::vector<int64_t>& out, const std::vector<int64_t>& dims) {
  int64_t index = 0, stride = 1;
  for (size_t k = out.size(); k-- > 0;) {
    const int64_t coord = i % out[k];
    i /= out[k];
    const size_t from_end = out.size() - 1 - k;
    if (from_end < dims.size()) {
      const int64_t d = dims[dims.size() - 1 - from_end];
      index += (d == 1 ? 0 : coord) * stride;
      stride *= d;
    }
  }
  return index;
}

// out[i] = f(a[.], b[.]) over the broadcast shape, in doubles; floats rounded to f32.
HostTensor hostBinary(const NodeContext& c, const HostTensor& a, const HostTensor& b, int type,
                      const std::function<double(double, double)>& f) {
  const std::vector<int64_t> dims = c.broadcast(a.dims, b.dims);
  const int64_t n = dimsNumel(dims);
  HostTensor r;
  r.type = type;
  r.dims = dims;
  if (isFloatType(type))
    r.floats.resize(size_t(n));
  else
    r.ints.resize(size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    const double v = f(a.at(sourceIndex(i, dims, a.dims)), b.at(sourceIndex(i, dims, b.dims)));
    if (isFloatType(type))
      r.floats[size_t(i)] = float(v);
    else
      r.ints[size_t(i)] = int64_t(v);
  }
  return r;
}

// Add, Sub, Mul, Div: on the host when both inputs are, else on the device (floats only).
template <ops::MapFn Fn>
void arithmetic(NodeContext& c) {
  if (c.allHost()) {
    const HostTensor &a = c.host(0), &b = c.host(1);
    const bool integer = !a.isFloat() && !b.isFloat();
    c.setHost(0, hostBinary(c, a, b, integer ? a.type : kFloat, [&](double x, double y) {
                switch (Fn) {
                  case ops::MapFn::Add:
                    return x + y;
                  case ops::MapFn::Sub:
                    return x - y;
                  case ops::MapFn::Mul:
                    return x * y;
                  default:  // integer division truncates toward zero, as ONNX's does
                    return integer ? (y == 0 ? 0.0 : std::trunc(x / y))
                                   : double(float(x) / float(y));
                }
              }));
    return;
  }
  if (!isFloatType(c.value(0).type) || !isFloatType(c.value(1).type))
    c.fail(
        "integer arithmetic on the device is not supported (only on values known when "
        "importing)");
  const std::vector<int64_t> dims = c.broadcast(c.dims(0), c.dims(1));
  const graph::Tensor a = c.tensor(0), b = c.tensor(1);
  graph::Tensor y;
  if constexpr (Fn == ops::MapFn::Add)
    y = c.g.add(a, b);
  else if constexpr (Fn == ops::MapFn::Mul)
    y = c.g.mul(a, b);
  else
    y = c.g.binary(Fn, a, b);
  c.setDevice(0, y, dims);
}

template <typename Cmp>
void comparison(NodeContext& c) {
  const HostTensor &a = c.host(0), &b = c.host(1);
  c.setHost(0,
            hostBinary(c, a, b, kBool, [](double x, double y) { return Cmp{}(x, y) ? 1.0 : 0.0; }));
}

void whereOp(NodeContext& c) {
  if (c.allHost()) {
    const HostTensor &cond = c.host(0), &a = c.host(1), &b = c.host(2);
    const std::vector<int64_t> dims = c.broadcast(cond.dims, c.broadcast(a.dims, b.dims));
    HostTensor r;
    r.type = a.type;
    r.dims = dims;
    const int64_t n = dimsNumel(dims);
    for (int64_t i = 0; i < n; ++i) {
      const bool pick = cond.at(sourceIndex(i, dims, cond.dims)) != 0;
      const HostTensor& from = pick ? a : b;
      const int64_t k = sourceIndex(i, dims, from.dims);
      if (r.isFloat())
        r.floats.push_back(float(from.at(k)));
      else
        r.ints.push_back(from.intAt(k));
    }
    c.setHost(0, std::move(r));
    return;
  }
  if (!isFloatType(c.value(1).type) || !isFloatType(c.value(2).type))
    c.fail("Where on the device picks between floats only");
  const std::vector<int64_t> dims = c.broadcast(c.dims(0), c.broadcast(c.dims(1), c.dims(2)));
  const graph::Tensor cond = c.tensor(0);
  c.setDevice(0, c.g.where(cond, c.tensor(1), c.tensor(2)), dims);
}

// x^y: a constant exponent becomes the activation kind Pow (exact products for 2 and 3).
void powOp(NodeContext& c) {
  if (c.allHost()) {
    c.setHost(0, hostBinary(c, c.host(0), c.host(1), c.host(0).type, [](double x, double y) {
                return double(std::pow(float(x), float(y)));
              }));
    return;
  }
  const HostTensor& e = c.host(1);
  if (e.numel() != 1) c.fail("the exponent must be one value (it is " + dimsText(e.dims) + ")");
  c.setDevice(0, c.g.pow(c.tensor(0), float(e.at(0))), c.broadcast(c.dims(0), e.dims));
}

// f(x) on the host, in f32 as the device computes it.
float hostUnary(ops::Activation kind, float x, float param) {
  switch (kind) {
    case ops::Activation::Neg:
      return -x;
    case ops::Activation::Reciprocal:
      return 1.0f / x;
    case ops::Activation::Sqrt:
      return std::sqrt(x);
    case ops::Activation::Exp:
      return std::exp(x);
    case ops::Activation::Log:
      return std::log(x);
    case ops::Activation::Erf:
      return std::erf(x);
    case ops::Activation::Tanh:
      return std::tanh(x);
    case ops::Activation::Sigmoid:
      return 1.0f / (1.0f + std::exp(-x));
    case ops::Activation::Relu:
      return x > 0 ? x : 0.0f;
    case ops::Activation::LeakyRelu:
      return x > 0 ? x : param * x;
    case ops::Activation::Elu:
      return x > 0 ? x : param * (std::exp(x) - 1.0f);
    default:
      return std::fabs(x);  // Abs
  }
}

template <ops::Activation Kind>
void unary(NodeContext& c) {
  float param = 0.0f;
  if constexpr (Kind == ops::Activation::LeakyRelu) param = c.attrFloat("alpha", 0.01f);
  if constexpr (Kind == ops::Activation::Elu) param = c.attrFloat("alpha", 1.0f);
  if (c.foldable(0)) {
    const HostTensor& x = c.host(0);
    if (!x.isFloat() && (Kind == ops::Activation::Neg || Kind == ops::Activation::Abs)) {
      HostTensor r = x;
      for (int64_t& v : r.ints) v = Kind == ops::Activation::Neg ? -v : (v < 0 ? -v : v);
      c.setHost(0, std::move(r));
      return;
    }
    HostTensor r = HostTensor::ofFloats(x.dims, x.toFloats());
    for (float& v : r.floats) v = hostUnary(Kind, v, param);
    c.setHost(0, std::move(r));
    return;
  }
  if (!isFloatType(c.value(0).type)) c.fail("takes floats");
  c.setDevice(0, c.g.activation(c.tensor(0), Kind, param), c.dims(0));
}

// Identity, and Dropout: the identity at inference (no training_mode, or a constant false)
// or with a ratio of 0; in training mode the graph's dropout (its own random masks).
void identity(NodeContext& c) {
  const Value& v = c.value(0);
  if (c.node.op_type() == "Dropout") {
    const float ratio = c.has(1) ? float(c.host(1).at(0)) : c.attrFloat("ratio", 0.5f);
    const bool training = c.has(2) && c.host(2).at(0) != 0;
    const bool mask = c.outputCount() > 1 && !c.node.output(1).empty();
    if (mask && training && ratio > 0) c.fail("the mask output of a training dropout");
    // Nothing dropped: the mask keeps every element.
    if (mask)
      c.setHost(
          1, HostTensor::ofInts(v.dims, std::vector<int64_t>(size_t(dimsNumel(v.dims)), 1), kBool));
    if (training && ratio > 0) {
      if (ratio >= 1) c.fail("ratio " + std::to_string(ratio));
      return c.setDevice(0, c.g.dropout(c.tensor(0), ratio), v.dims);
    }
  }
  if (c.foldable(0)) {
    c.setHost(0, *v.host);
  } else {
    c.setDevice(0, c.tensor(0), v.dims, v.type);
  }
}

void cast(NodeContext& c) {
  const int to = int(c.attrInt("to", kFloat));
  if (!isFloatType(to) && !isIntegerType(to)) c.fail(std::string("cast to ") + elemTypeName(to));
  if (c.foldable(0)) {
    const HostTensor& x = c.host(0);
    HostTensor r;
    r.type = to;
    r.dims = x.dims;
    for (int64_t i = 0; i < x.numel(); ++i) {
      if (isFloatType(to))
        r.floats.push_back(float(x.at(i)));
      else if (to == kBool)
        r.ints.push_back(x.at(i) != 0);
      else
        r.ints.push_back(x.isFloat() ? int64_t(std::trunc(x.at(i))) : x.ints[size_t(i)]);
    }
    c.setHost(0, std::move(r));
    return;
  }
  // On the device floats stay f32 (the precision policy decides storage), ids stay u32.
  if (isFloatType(to) != isFloatType(c.value(0).type))
    c.fail(std::string("a cast between floats and integers on the device (") +
           elemTypeName(c.value(0).type) + " to " + elemTypeName(to) + ")");
  c.setDevice(0, c.tensor(0), c.dims(0), to);
}

void notOp(NodeContext& c) {
  const HostTensor& x = c.host(0);
  HostTensor r = HostTensor::ofInts(x.dims, {}, kBool);
  for (int64_t i = 0; i < x.numel(); ++i) r.ints.push_back(x.at(i) == 0);
  c.setHost(0, std::move(r));
}

}  // namespace

void registerElementwise(OpTable& t) {
  t["Add"] = arithmetic<ops::MapFn::Add>;
  t["Sub"] = arithmetic<ops::MapFn::Sub>;
  t["Mul"] = arithmetic<ops::MapFn::Mul>;
  t["Div"] = arithmetic<ops::MapFn::Div>;
  t["Pow"] = powOp;
  t["Equal"] = comparison<std::equal_to<double>>;
  t["Less"] = comparison<std::less<double>>;
  t["Greater"] = comparison<std::greater<double>>;
  t["Not"] = notOp;
  t["Where"] = whereOp;
  t["Neg"] = unary<ops::Activation::Neg>;
  t["Reciprocal"] = unary<ops::Activation::Reciprocal>;
  t["Sqrt"] = unary<ops::Activation::Sqrt>;
  t["Exp"] = unary<ops::Activation::Exp>;
  t["Log"] = unary<ops::Activation::Log>;
  t["Erf"] = unary<ops::Activation::Erf>;
  t["Tanh"] = unary<ops::Activation::Tanh>;
  t["Sigmoid"] = unary<ops::Activation::Sigmoid>;
  t["Relu"] = unary<ops::Activation::Relu>;
  t["LeakyRelu"] = unary<ops::Activation::LeakyRelu>;
  t["Elu"] = unary<ops::Activation::Elu>;
  t["Abs"] = unary<ops::Activation::Abs>;
  t["Identity"] = identity;
  t["Dropout"] = identity;
  t["Cast"] = cast;
}

}  // namespace vkgrad::onnx
