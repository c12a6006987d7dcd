#version 450
// Stage 3 of clipGradScale (ops/optimizer.h): state.grad_scale = norm[1], the clip factor
// optimizer/norm computed on the device; the updates multiply each gradient by it as they read it.
layout(local_size_x = 1) in;

layout(set = 0, binding = 0) readonly buffer Norm { float norm[]; };  // {norm, scale}
layout(set = 0, binding = 1) buffer State {
  float lr;
  uint step;
  float beta1, beta2, bias1, bias2;
  float grad_scale;
} state;

void main() { state.grad_scale = norm[1]; }
