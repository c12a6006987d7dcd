// The per-element terms of a VAE's loss, shared by the row sums (rows.comp) and the
// gradients (backward.comp). The kinds are the KIND specialization constant:
//   0 Bce: a = logit l, b = target t in [0, 1]: max(l, 0) - t l + log(1 + exp(-|l|)), the
//          binary cross-entropy of sigmoid(l) against t, finite for any finite l;
//   1 Mse: a = logit l, b = target t: (sigmoid(l) - t)^2;
//   2 Kl:  a = mu, b = log sigma: (mu^2 + exp(2 log sigma) - 1) / 2 - log sigma, the KL
//          divergence of N(mu, sigma^2) from N(0, 1).
#ifndef VKGRAD_VAE_LOSS_TERMS_GLSL
#define VKGRAD_VAE_LOSS_TERMS_GLSL

#include "common/ew_math.glsl"

// log(1 + e) for e in [0, 1], without losing e when it is tiny: u = 1 + e rounds, and the
// second term puts back what the rounding took.
float log1pSmall(float e) {
  const float u = 1.0 + e;
  return u == 1.0 ? e : log(u) * (e / (u - 1.0));
}

float term(uint kind, float a, float b) {
  if (kind == 0u) return max(a, 0.0) - b * a + log1pSmall(ewExp(-abs(a)));
  if (kind == 1u) {
    const float d = ewSigmoid(a) - b;
    return d * d;
  }
  return 0.5 * (a * a + ewExpm1(2.0 * b)) - b;  // exp(2b) - 1 as expm1: exact near b = 0
}

#endif
