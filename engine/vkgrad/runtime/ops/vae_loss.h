// The two terms of a variational autoencoder's loss as graph ops (ops/vae_loss.h; defined in
// vae_loss.cpp).
#pragma once

#include "vkgrad/ops/vae_loss.h"
#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// logits, targets (B, ...) f32, the same shape, targets in [0, 1] -> (1): the mean over the
// first axis of each row's summed error between sigmoid(logits) and targets (Bce: binary
// cross-entropy from the logits, stable for any logit; Mse: squared error). Targets get no
// gradient.
Tensor reconstructionLoss(Graph& g, Tensor logits, Tensor targets, ops::Reconstruction kind);
// mu, log_sigma (B, ...) -> (1): the mean over the first axis of each row's
// KL(N(mu, sigma^2) || N(0, I)) = sum of (mu^2 + exp(2 log_sigma) - 1) / 2 - log_sigma.
Tensor gaussianKl(Graph& g, Tensor mu, Tensor log_sigma);

}  // namespace vkgrad::graph
