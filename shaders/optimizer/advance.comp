#version 450
// Advances an optimizer state buffer by one step, on the device (one invocation):
// step += 1 and bias_k = 1 - beta_k^step through bias <- (1 - beta) + beta * bias. The
// recurrence has no cancellation; 1 - pow(beta2, t) in fp32 would lose about 3 digits at
// t = 1 for beta2 = 0.999 (Vulkan allows pow an error of 2^-21 in log2(x) near 1).
layout(local_size_x = 1) in;

layout(set = 0, binding = 0) buffer State {
  float lr;
  uint step;
  float beta1, beta2, bias1, bias2;
  float grad_scale;
  uint skip;  // nonzero: this step does not count (an fp16 step that overflowed)
} state;

void main() {
  if (state.skip != 0u) return;
  state.step += 1;
  state.bias1 = (1.0 - state.beta1) + state.beta1 * state.bias1;
  state.bias2 = (1.0 - state.beta2) + state.beta2 * state.bias2;
}
