#version 450
// AdamW (Loshchilov & Hutter), in place, PyTorch's order: decoupled weight decay first,
// then the bias-corrected Adam step with eps outside the square root:
//   p *= 1 - lr * wd
//   m = b1 * m + (1 - b1) * g;   v = b2 * v + (1 - b2) * g^2
//   p -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
// lr, b1, b2 and the bias corrections 1 - b^t come from the optimizer state buffer.
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) buffer Param { float param[]; };       // (n)
layout(set = 0, binding = 1) readonly buffer Grad { float grad[]; };  // (n)
layout(set = 0, binding = 2) buffer M { float m1[]; };                // (n) first moment
layout(set = 0, binding = 3) buffer V { float m2[]; };                // (n) second moment
layout(set = 0, binding = 4) readonly buffer State {
  float lr;
  uint step;
  float beta1, beta2, bias1, bias2;
} state;
layout(push_constant) uniform Push { uint n; float eps, weight_decay; } p;

void main() {
  const float lr = state.lr, b1 = state.beta1, b2 = state.beta2;
  // Before the first advanceStep the corrections are 1 - b^0 = 0; act as step 1 rather
  // than divide by zero.
  const float bias1 = state.bias1 > 0.0 ? state.bias1 : 1.0 - b1;
  const float bias2 = state.bias2 > 0.0 ? state.bias2 : 1.0 - b2;
  const float decay = 1.0 - lr * p.weight_decay;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const float g = grad[i];
    const float m = b1 * m1[i] + (1.0 - b1) * g;
    const float v = b2 * m2[i] + (1.0 - b2) * (g * g);
    m1[i] = m;
    m2[i] = v;
    param[i] = param[i] * decay - lr * (m / bias1) / (sqrt(v / bias2) + p.eps);
  }
}
