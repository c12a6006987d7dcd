// Optimizer updates and global gradient-norm clipping on the device. Updates are in
// place: one dispatch per parameter tensor updates it and its state buffers, or, with
// adamwMany() and a gradient norm given a table, one dispatch for every run of tensors that
// share their buffers (a model's parameters, gradients and moments each in one flat buffer:
// runtime/executor.h, runtime/parameters.h).
//
// What changes from step to step (learning rate, step count, Adam's bias corrections)
// lives in a small device buffer, the optimizer state, that kernels read when they run:
// a command buffer recorded once can be replayed every step. For a constant learning rate
// nothing needs writing from the host at all: record advanceStep() before the updates of a
// step and it moves the step on, on the device. For a schedule, the host writes the new lr
// (the first word) before each replay.
#pragma once

#include <cstdint>
#include <limits>
#include <span>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The layout of an optimizer state buffer (upload it as 8 u32 words; one per optimizer,
// or per parameter group with its own betas).
struct OptimizerState {
  float lr = 0;        // learning rate of the next update; the host may rewrite it any step
  uint32_t step = 0;   // updates begun so far; advanceStep() adds 1 on the device
  float beta1 = 0.9f;  // AdamW moment decays (SGD ignores them); fixed after creation
  float beta2 = 0.999f;
  float bias1 = 0;  // 1 - beta1^step and 1 - beta2^step, kept by advanceStep()
  float bias2 = 0;
  // Every update multiplies the gradient it reads by this: 1, or the clip factor
  // clipGradScale() last wrote (divided by the loss scale: updateLossScale()). The gradient
  // buffers themselves stay as they are.
  float grad_scale = 1.0f;
  // Nonzero: advanceStep, sgd and adamw change nothing this step (updateLossScale() found
  // the gradients overflowed).
  uint32_t skip = 0;
  static OptimizerState make(float lr, float beta1 = 0.9f, float beta2 = 0.999f) {
    return {lr, 0, beta1, beta2, 0.0f, 0.0f, 1.0f, 0};
  }
};
static_assert(sizeof(OptimizerState) == 32);

// Every op below takes `state`: a u32 view of at least 8 elements holding an OptimizerState.

// step += 1, bias_k = 1 - beta_k^step. Record it once per step, before that step's updates:
// starting from make(), the first update then sees step 1.
void advanceStep(vk::Recorder& rec, const TensorView& state);

struct SgdOptions {
  float momentum = 0.9f;
  float weight_decay = 0.0f;  // coupled (L2): added to the gradient
  bool nesterov = false;
};
// param, grad, velocity: same shape; velocity starts at 0. PyTorch's convention:
//   g' = g + wd * p;  v = momentum * v + g';  p -= lr * (nesterov ? g' + momentum * v : v)
void sgd(vk::Recorder& rec, const TensorView& param, const TensorView& grad,
         const TensorView& velocity, const TensorView& state, const SgdOptions& options = {});

enum class AdamWVariant {
  Auto,  // Texel where every view allows it, else Storage
  // One float per step through storage buffers: any device, any aligned view (in two passes,
  // the moments then the weights, with the same bits, where the device binds fewer than 5
  // storage buffers per stage).
  Storage,
  Texel,  // four floats per step: texel fetches and 16-byte stores (views on 16 bytes)
};
struct AdamWOptions {
  float eps = 1e-8f;
  float weight_decay = 0.01f;  // decoupled; pass 0 for biases and norm gains
  AdamWVariant variant = AdamWVariant::Auto;
};
// param, grad, m, v: same shape; m, v start at 0. beta1, beta2 come from the state buffer.
//   p *= 1 - lr * wd;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   p -= lr * (m / bias1) / (sqrt(v / bias2) + eps)
// Throws Error when options.variant is Texel and a view cannot be read or written that way.
void adamw(vk::Recorder& rec, const TensorView& param, const TensorView& grad, const TensorView& m,
           const TensorView& v, const TensorView& state, const AdamWOptions& options = {});

// Many tensors in one dispatch: a segment table of 8 u32 words per tensor (where it lies in
// each binding, its size, its weight decay, which workgroups take it), written into `table`
// by the recording itself (vk::Recorder::update) and read by the kernel. `table` is a u32
// view of at least segmentTableWords(tensors) elements that nothing else uses during the op.
int64_t segmentTableWords(size_t tensors);

struct AdamWTensor {
  TensorView param, grad, m, v;  // as adamw()'s
  float weight_decay = 0.0f;
};
// adamw() for every tensor, with the same bits, in as few dispatches as their placement
// allows: one for each run of consecutive tensors whose params lie in one buffer (their grads
// in one buffer, their ms in one, their vs in one), each view on 16 bytes and each run's span
// within one texel and storage binding; one adamw() each for the rest. options.weight_decay
// is ignored (each tensor has its own); options.variant Storage or Texel records one adamw()
// per tensor with that variant (for comparisons). On a device that binds fewer than 5 storage
// buffers per stage (the many-tensor kernel binds 5), one adamw() per tensor.
void adamwMany(vk::Recorder& rec, std::span<const AdamWTensor> tensors, const TensorView& state,
               const TensorView& table, const AdamWOptions& options = {});

// f32 elements of scratch gradNorm/clipGradNorm need for these gradients.
int64_t gradNormScratch(std::span<const TensorView> grads);

// norm: (>= 2) f32 <- {sqrt(sum of g^2 over every element of every grad),
//                      min(1, max_norm / (norm + 1e-6))}. Deterministic: fixed-order partial
// sums (one dispatch per gradient) then one workgroup adds them. No host readback. With a
// table (segmentTableWords(grads.size()) u32), each run of consecutive gradients in one
// buffer whose span one storage binding holds takes one dispatch for its partial sums: the
// same sums in the same order, so the same bits.
void gradNorm(vk::Recorder& rec, std::span<const TensorView> grads, const TensorView& scratch,
              const TensorView& norm, float max_norm = std::numeric_limits<float>::infinity(),
              const TensorView& table = {});
// gradNorm, then every grad *= norm[1] (those below the threshold are left untouched).
void clipGradNorm(vk::Recorder& rec, std::span<const TensorView> grads, float max_norm,
                  const TensorView& scratch, const TensorView& norm, const TensorView& table = {});
// gradNorm, then state.grad_scale = norm[1]: the next sgd()/adamw() with this state clip
// the gradients as they read them. No gradient is rewritten (clipGradNorm writes every one),
// so the gradient buffers keep their unclipped values.
void clipGradScale(vk::Recorder& rec, std::span<const TensorView> grads, float max_norm,
                   const TensorView& scratch, const TensorView& norm, const TensorView& state,
                   const TensorView& table = {});

// Dynamic loss scaling (fp16 training): the loss's gradient is seeded with `scale` instead of
// 1, so small gradients stay above fp16's smallest numbers; the updates divide it back out.
// PyTorch's GradScaler defaults.
struct LossScaleOptions {
  float init = 65536.0f;  // 2^16
  float growth = 2.0f;    // after `interval` finite steps in a row
  float backoff = 0.5f;   // after a step whose gradients overflowed (which is skipped)
  uint32_t interval = 2000;
  float min_scale = 1.0f, max_scale = 16777216.0f;  // 2^24
};
// The u32 words of a loss-scale counters tensor: finite steps since the scale changed, steps
// skipped in all, whether the last step was skipped.
constexpr int64_t kLossScaleCounters = 3;
// After gradNorm of the scaled gradients into norm: sets state.grad_scale = clip / scale
// (clip from max_norm over the unscaled norm; max_norm 0: none) and state.skip = 0, or, on a
// non-finite norm, state.skip = 1; then grows or shrinks scale ((1) f32) and updates counters
// ((kLossScaleCounters) u32), on the device. Record it after the backward pass and before
// advanceStep and the updates.
void updateLossScale(vk::Recorder& rec, const TensorView& norm, const TensorView& scale,
                     const TensorView& counters, const TensorView& state, float max_norm,
                     const LossScaleOptions& options);

}  // namespace vkgrad::ops
