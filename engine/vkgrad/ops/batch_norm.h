// Batch normalisation over the channel axis of x (N,C,...): an image batch (N,C,H,W) or an
// MLP's activations (N,C). Each channel c is normalised over N and every spatial position:
//
//   training:  mean_c, var_c = the mean and biased (1/M) variance of x[:, c, ...], M = N * S
//              y = (x - mean_c) * rstd_c * gamma_c + beta_c,   rstd_c = 1 / sqrt(var_c + eps)
//              running_mean = (1 - momentum) running_mean + momentum mean_c
//              running_var  = (1 - momentum) running_var  + momentum var_c * M / (M - 1)
//   inference: the same y with running_mean and running_var in place of mean_c and var_c
//
// (PyTorch's BatchNorm: the running variance is the unbiased one, momentum 0.1.) One
// workgroup per channel runs the whole forward (both statistics passes, the running update,
// y) and the whole backward (both sums, dgamma, dbeta, dx) in one dispatch each, in a fixed
// order: deterministic, no atomics. x, y, gamma, beta, dy, dx, dgamma and dbeta may each be
// f32, f16 or bf16 as its view says (16-bit needs the device's 16-bit storage); the
// statistics (mean, rstd, running_mean, running_var) are f32, and so is all arithmetic.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The shape rule, Vulkan-free (the graph builder uses it too): x (N,C,...) of rank >= 2 and at
// most 2^31 elements, gamma and beta (C), eps finite and >= 0; in training at least 2 values
// per channel (N * S >= 2: the unbiased variance). Returns the statistics' shape, (C). Throws
// ShapeError "batchNorm: x (4,7,3,3) needs gamma (7), got (8)".
Shape batchNormStatsShape(const Shape& x, const Shape& gamma, const Shape& beta, float eps,
                          bool training);

// How a workgroup covers its channel; Auto picks per device (batch_norm.cpp, measured).
enum class BatchNormVariant {
  Auto,       // Subgroup on CPU devices where the loop limit allows, else Workgroup
  Workgroup,  // 32 to 256 invocations, reductions through shared memory with barriers
  // One subgroup: no shared memory, no barriers. Only for devices that run a workgroup of
  // subgroupSize invocations as one subgroup (CPU drivers); elsewhere the output is NaN,
  // never silently wrong. lavapipe: ~2x faster than Workgroup.
  Subgroup,
};

// The running statistics a training forward updates in place, (C) f32 each.
struct BatchNormRunning {
  TensorView mean, var;
  float momentum = 0.1f;  // in [0, 1]
};

// Training forward. x: (N,C,...); gamma, beta: (C); y: like x (may not overlap x); mean, rstd:
// (C) f32, written for the backward. running, if given, is updated in place. Throws ShapeError
// before recording anything on bad shapes, dtypes, overlaps or sizes.
void batchNorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps = 1e-5f, const BatchNormRunning* running = nullptr,
               BatchNormVariant variant = BatchNormVariant::Auto);

// Inference forward: y from running_mean and running_var ((C) f32, read only).
void batchNormInference(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                        const TensorView& beta, const TensorView& running_mean,
                        const TensorView& running_var, const TensorView& y, float eps = 1e-5f,
                        BatchNormVariant variant = BatchNormVariant::Auto);

// Backward. x, dy: (N,C,...); gamma: (C). In training mode mean and rstd are the (C) f32
// statistics the forward saved; in inference mode (training false) they are running_mean and
// running_var, and rstd = 1 / sqrt(running_var + eps) is taken inside. Each output is written
// (= or += by its Write) when its view has a buffer, else skipped:
//   dx: like x   training:  gamma rstd (dy - (sum dy + xhat sum dy xhat) / M)
//                inference: gamma rstd dy
//   dgamma: (C)  sum over N and S of dy * xhat,  xhat = (x - mean) * rstd
//   dbeta: (C)   sum over N and S of dy
// At least one output; outputs may not overlap each other or any input.
struct BatchNormGrads {
  TensorView dx, dgamma, dbeta;
  Write dx_write = Write::Overwrite, dgamma_write = Write::Overwrite,
        dbeta_write = Write::Overwrite;
};
void batchNormBackward(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                       const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                       const BatchNormGrads& grads, bool training = true, float eps = 1e-5f,
                       BatchNormVariant variant = BatchNormVariant::Auto);

}  // namespace vkgrad::ops
