// Elementwise activations, forward and backward, all f32. One kernel per direction, with
// the kind as a specialization constant. exp, tanh, sigmoid and the GELUs use the float-
// accurate helpers of shaders/common/ew_math.glsl (a few 1e-7 relative); GeluErf's erf is
// the Numerical Recipes erfc fit (fractional error < 1.2e-7), evaluated without
// cancellation in the negative tail. In place (y exactly x) is allowed; the backward needs x
// or y, so keep whichever activationBackwardReadsX() says.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The order is the KIND specialization constant of shaders/activation/activation.glsl.
enum class Activation {
  Relu,       // max(x, 0)
  LeakyRelu,  // x > 0 ? x : param * x       (param: the negative slope)
  GeluTanh,   // x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
  GeluErf,    // x/2 (1 + erf(x / sqrt(2)))
  Sigmoid,    // 1 / (1 + exp(-x))
  Tanh,       //
  Elu,        // x > 0 ? x : param * (exp(x) - 1)   (param: alpha)
  Exp,        //
  Log,        // x > 0 expected; log(0) = -inf, log(x < 0) = NaN
  // The unary functions of general graphs (imported models), elementwise like the above.
  Neg,         // -x
  Reciprocal,  // 1 / x
  Sqrt,        // x >= 0 expected
  Rsqrt,       // 1 / sqrt(x)
  Pow,         // x^param for a constant exponent: exact products for 2 and 3, sign kept for
               // odd integer powers of negative x, NaN for fractional powers of negative x
  Erf,         // the error function
  Silu,        // x * sigmoid(x) (swish)
  Abs,         // |x|; its derivative is taken as 0 at 0
};
const char* activationName(Activation kind);

// True: the backward reads x (LeakyRelu, GeluTanh, GeluErf, Elu, Log, Pow, Erf, Silu, Abs);
// false: it reads y.
bool activationBackwardReadsX(Activation kind);

// x, y: the same shape (any rank). param: see Activation; ignored by the kinds without one.
void activation(vk::Recorder& rec, Activation kind, const TensorView& x, const TensorView& y,
                float param = 0.0f);
// dx (= or +=) f'(x) * dy. x, y, dy, dx: the same shape. The one of x and y the kind does not
// read may be an empty TensorView. dx may be exactly one of the inputs.
void activationBackward(vk::Recorder& rec, Activation kind, const TensorView& x,
                        const TensorView& y, const TensorView& dy, const TensorView& dx,
                        float param = 0.0f, Write w = Write::Overwrite);

}  // namespace vkgrad::ops
