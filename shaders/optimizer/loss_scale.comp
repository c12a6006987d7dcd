#version 450
// Dynamic loss scaling for fp16 training, on the device (one invocation), after the global
// norm of the scaled gradients (optimizer/norm: norm[0]) and before the step's updates:
//   finite norm:  grad_scale = clip / scale (the updates unscale as they read), skip = 0,
//                 and after `interval` finite steps in a row the scale grows by `growth`;
//   inf or NaN:   skip = 1 (advance, adamw and sgd leave everything as it is), the scale
//                 shrinks by `backoff`, and the skipped steps are counted.
// The backward pass of the next step reads the new scale as its seed: no host read-back.
layout(local_size_x = 1) in;

layout(set = 0, binding = 0) readonly buffer Norm { float norm[]; };  // {norm of the scaled grads, -}
layout(set = 0, binding = 1) buffer Scale { float scale; };           // the seed of backward
layout(set = 0, binding = 2) buffer Counters {
  uint clean;    // finite steps since the scale last changed
  uint skipped;  // steps skipped in all
  uint last;     // 1 when the last step was skipped
} counters;
layout(set = 0, binding = 3) buffer State {
  float lr;
  uint step;
  float beta1, beta2, bias1, bias2;
  float grad_scale;
  uint skip;
} state;
layout(push_constant) uniform Push {
  float max_norm;  // of the unscaled gradients; 0: no clipping
  float growth, backoff;
  uint interval;
  float min_scale, max_scale;
} p;

void main() {
  const float total = norm[0], s = scale;
  if (isnan(total) || isinf(total)) {
    state.skip = 1u;
    scale = max(s * p.backoff, p.min_scale);
    counters.clean = 0u;
    counters.skipped += 1u;
    counters.last = 1u;
    return;
  }
  const float unscaled = total / s;
  const float clip = p.max_norm > 0.0 ? min(1.0, p.max_norm / (unscaled + 1e-6)) : 1.0;
  state.grad_scale = clip / s;
  state.skip = 0u;
  counters.last = 0u;
  counters.clean += 1u;
  if (counters.clean >= p.interval) {
    scale = min(s * p.growth, p.max_scale);
    counters.clean = 0u;
  }
}
