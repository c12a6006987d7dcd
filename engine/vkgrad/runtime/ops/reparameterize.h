// A variational autoencoder's sample as a graph op (ops/random.h; defined in
// reparameterize.cpp).
#pragma once

#include "vkgrad/runtime/graph.h"

namespace vkgrad::graph {

// mu, log_sigma (...) f32, the same shape -> z = mu + exp(log_sigma) * eps, eps standard
// normal from the graph's generator, as dropout's (a fresh draw every step, drawn again
// rather than stored for the backward pass, one stream per call site). Draws in evaluation
// graphs too: a VAE's test loss samples z.
Tensor reparameterize(Graph& g, Tensor mu, Tensor log_sigma);

}  // namespace vkgrad::graph
