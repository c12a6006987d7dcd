#include "vkgrad/ops/reference/activation.h"

#include <cmath>

namespace vkgrad::ops::ref {
namespace {

constexpr double kSqrt2OverPi = 0.79788456080286535588;
constexpr double kGeluC = 0.044715;
constexpr double kInvSqrt2 = 0.70710678118654752440;
constexpr double kInvSqrt2Pi = 0.39894228040143267794;

double sigmoid(double x) { return x >= 0 ? 1 / (1 + std::exp(-x)) : std::exp(x) / (1 + std::exp(x)); }

}  // namespace

double activate(Activation kind, double x, double param) {
  switch (kind) {
    case Activation::Relu: return x > 0 ? x : 0;
    case Activation::LeakyRelu: return x > 0 ? x : param * x;
    // (1 + tanh(u)) / 2 = sigmoid(2u): 1 + tanh(u) cancels for very negative x, even in double.
    case Activation::GeluTanh: return x * sigmoid(2 * kSqrt2OverPi * (x + kGeluC * x * x * x));
    // erfc keeps the negative tail exact (1 + erf(x) cancels there).
    case Activation::GeluErf: return 0.5 * x * std::erfc(-x * kInvSqrt2);
    case Activation::Sigmoid: return sigmoid(x);
    case Activation::Tanh: return std::tanh(x);
    case Activation::Elu: return x > 0 ? x : param * std::expm1(x);
    case Activation::Exp: return std::exp(x);
    case Activation::Log: return std::log(x);
    case Activation::Neg: return -x;
    case Activation::Reciprocal: return 1 / x;
    case Activation::Sqrt: return std::sqrt(x);
    case Activation::Rsqrt: return 1 / std::sqrt(x);
    case Activation::Pow: return std::pow(x, param);
    case Activation::Erf: return std::erf(x);
    case Activation::Silu: return x * sigmoid(x);
    case Activation::Abs: return std::fabs(x);
  }
  return 0;
}

double activationDerivative(Activation kind, double x, double param) {
  switch (kind) {
    case Activation::Relu: return x > 0 ? 1 : 0;
    case Activation::LeakyRelu: return x > 0 ? 1 : param;
    case Activation::GeluTanh: {
      // With s = sigmoid(2u): (1 + tanh u) / 2 = s and 1 - tanh(u)^2 = 4 s (1 - s).
      const double u2 = 2 * kSqrt2OverPi * (x + kGeluC * x * x * x);
      const double s = sigmoid(u2), s_neg = sigmoid(-u2);
      return s + 2 * x * s * s_neg * kSqrt2OverPi * (1 + 3 * kGeluC * x * x);
    }
    case Activation::GeluErf:
      return 0.5 * std::erfc(-x * kInvSqrt2) + x * kInvSqrt2Pi * std::exp(-0.5 * x * x);
    case Activation::Sigmoid: return sigmoid(x) * (1 - sigmoid(x));
    case Activation::Tanh: return 1 - std::tanh(x) * std::tanh(x);
    case Activation::Elu: return x > 0 ? 1 : param * std::exp(x);
    case Activation::Exp: return std::exp(x);
    case Activation::Log: return 1 / x;
    case Activation::Neg: return -1;
    case Activation::Reciprocal: return -1 / (x * x);
    case Activation::Sqrt: return 0.5 / std::sqrt(x);
    case Activation::Rsqrt: return -0.5 / (x * std::sqrt(x));
    case Activation::Pow: return param * std::pow(x, param - 1);
    case Activation::Erf: return 1.12837916709551257390 * std::exp(-x * x);
    case Activation::Silu: return sigmoid(x) * (1 + x * (1 - sigmoid(x)));
    case Activation::Abs: return x > 0 ? 1 : x < 0 ? -1 : 0;
  }
  return 0;
}

void activation(Activation kind, const float* x, float* y, int64_t n, float param) {
  for (int64_t i = 0; i < n; ++i) y[i] = float(activate(kind, x[i], param));
}

void activationBackward(Activation kind, const float* x, const float* dy, float* dx, int64_t n,
                        float param) {
  for (int64_t i = 0; i < n; ++i) dx[i] = float(activationDerivative(kind, x[i], param) * dy[i]);
}

}  // namespace vkgrad::ops::ref
