#version 450
// SGD with momentum, in place, PyTorch's convention (weight decay is coupled L2):
//   g' = g + wd * p;  v = mu * v + g';  p -= lr * (nesterov ? g' + mu * v : v)
// lr comes from the optimizer state buffer (ops/optimizer.h), so a replayed recording picks up
// whatever learning rate the host wrote since; g is scaled by its grad_scale (clipping).
layout(local_size_x_id = 0) in;

layout(set = 0, binding = 0) buffer Param { float param[]; };       // (n)
layout(set = 0, binding = 1) readonly buffer Grad { float grad[]; };  // (n)
layout(set = 0, binding = 2) buffer Velocity { float velocity[]; };   // (n)
layout(set = 0, binding = 3) readonly buffer State {
  float lr;
  uint step;
  float beta1, beta2, bias1, bias2;
  float grad_scale;  // the clip factor, 1 without clipping (ops/optimizer.h)
  uint skip;         // nonzero: this step changes nothing (an fp16 step that overflowed)
} state;
layout(push_constant) uniform Push { uint n; float momentum, weight_decay; uint nesterov; } p;

void main() {
  if (state.skip != 0u) return;  // the same for every invocation
  const float lr = state.lr;
  for (uint i = gl_GlobalInvocationID.x; i < p.n; i += gl_NumWorkGroups.x * gl_WorkGroupSize.x) {
    const float w = param[i];
    const float g = grad[i] * state.grad_scale + p.weight_decay * w;
    const float v = p.momentum * velocity[i] + g;
    velocity[i] = v;
    param[i] = w - lr * (p.nesterov != 0 ? g + p.momentum * v : v);
  }
}
