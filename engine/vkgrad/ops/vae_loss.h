// The two terms of a variational autoencoder's loss, each one fused op: the reconstruction
// error of decoded logits against the images, and the KL divergence of the encoder's
// Gaussian from N(0, I). Each is a per-row sum over the row's elements (one image, one latent
// vector) and then the mean over rows: "nats per image". The backward of each is one
// elementwise kernel per gradient, reading the upstream gradient of the mean on the device.
//
//   reconstruction, Bce: sum_j max(l, 0) - t l + log(1 + exp(-|l|))   binary cross-entropy of
//                        sigmoid(l) against t, stable for any finite logit l
//   reconstruction, Mse: sum_j (sigmoid(l) - t)^2
//   gaussianKl:          sum_j (mu^2 + exp(2 log sigma) - 1) / 2 - log sigma
//
// Deterministic: fixed-order (Kahan, then workgroup-tree) sums, no atomics. exp and sigmoid
// are the float-accurate helpers of shaders/common/ew_math.glsl.
//
// logits, targets, mu, log_sigma, dmean and the gradients are each f32, f16 or bf16
// (ops/storage.h), in any mix; the terms and sums are f32, and a 16-bit gradient rounds once,
// when stored. The losses, rows and mean, are f32.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

enum class Reconstruction {
  Bce,  // Bernoulli cross-entropy with logits (targets in [0, 1])
  Mse,  // squared error of sigmoid(logits)
};

// The shape rule, Vulkan-free (the graph builder uses it too): a and b the same non-empty
// shape of rank >= 1, rows (the first axis) below 2^24 and elements below 2^31. Returns the
// shape of the row sums, (rows). Throws ShapeError "gaussianKl: mu (4,3), log_sigma (4,2):
// ... must have the same shape".
Shape rowLossShape(const char* op, const char* a_name, const Shape& a, const char* b_name,
                   const Shape& b);

// logits, targets: (B, ...), the same shape; rows: (B) f32; mean: (1) f32.
//   rows[r] = the row's summed error, mean = sum(rows) / B.
void reconstructionLoss(vk::Recorder& rec, Reconstruction kind, const TensorView& logits,
                        const TensorView& targets, const TensorView& rows, const TensorView& mean);
// dmean: (1), the upstream gradient of mean; dlogits like logits, (= or +=) its gradient.
// Targets get none.
void reconstructionLossBackward(vk::Recorder& rec, Reconstruction kind, const TensorView& logits,
                                const TensorView& targets, const TensorView& dmean,
                                const TensorView& dlogits, Write w = Write::Overwrite);

// mu, log_sigma: (B, ...), the same shape; rows: (B) f32; mean: (1) f32.
void gaussianKl(vk::Recorder& rec, const TensorView& mu, const TensorView& log_sigma,
                const TensorView& rows, const TensorView& mean);
// Which input's gradient gaussianKlBackward writes.
enum class KlInput { Mu, LogSigma };
// dmean: (1); grad like mu, (= or +=) dmean / B * mu (Mu) or dmean / B * (exp(2 log sigma) - 1)
// (LogSigma).
void gaussianKlBackward(vk::Recorder& rec, KlInput input, const TensorView& mu,
                        const TensorView& log_sigma, const TensorView& dmean,
                        const TensorView& grad, Write w = Write::Overwrite);

}  // namespace vkgrad::ops
