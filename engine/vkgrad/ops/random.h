// Random numbers on the device: raw bits, uniform and normal samples, dropout and
// categorical sampling, all drawn from one counter-based generator (Philox 4x32-10,
// shaders/common/philox.glsl), so a draw is a pure function of (seed, offset, stream,
// element index): the same on every run, and recomputable instead of stored.
//
// The seed and offset live in a small device buffer, the rng state: 4 u32 words
//   {seed_lo, seed_hi, offset_lo, offset_hi}            (RngState mirrors it)
// Kernels read it when they run, not when they are recorded, so a recorded command buffer
// draws fresh randomness on every replay once the offset changes: either the host writes a
// new offset, or rngAdvance() (recorded once, e.g. at the end of a step) adds to it on the
// device. Element i of stream s is
//   philox4x32_10(counter = {i / 4, s, offset_lo, offset_hi}, key = {seed_lo, seed_hi})[i % 4]
// The stream, fixed at record time, keeps the draws of different call sites that share
// one state buffer apart (e.g. one stream per dropout layer). A draw has < 2^32 - 3 elements.
#pragma once

#include <cstdint>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// The layout of an rng state buffer (upload it as 4 u32 words).
struct RngState {
  uint32_t seed_lo = 0, seed_hi = 0, offset_lo = 0, offset_hi = 0;
  static RngState make(uint64_t seed, uint64_t offset = 0) {
    return {uint32_t(seed), uint32_t(seed >> 32), uint32_t(offset), uint32_t(offset >> 32)};
  }
};
static_assert(sizeof(RngState) == 16);

// Every op below takes `rng`: a u32 view of at least 4 elements holding an RngState.

// out: (...) u32, the raw stream words.
void randomBits(vk::Recorder& rec, const TensorView& out, const TensorView& rng,
                uint32_t stream = 0);
// out: (...) f32, lo + (hi - lo) * u, u in [0, 1) with 24 random bits.
void uniform(vk::Recorder& rec, const TensorView& out, float lo, float hi, const TensorView& rng,
             uint32_t stream = 0);
// out: (...) f32, mean + stddev * z, z standard normal by Box-Muller (|z| <= 5.77).
void normal(vk::Recorder& rec, const TensorView& out, float mean, float stddev,
            const TensorView& rng, uint32_t stream = 0);

// Dropout and the reparameterisation take float tensors in f32, f16 or bf16, each in its own
// (ops/storage.h): the draws are the same whatever the formats, the arithmetic is f32, and an
// output is rounded once as it is stored. An output on its input's bytes needs its dtype.
// uniform and normal write f32.

// x, y: same shape. y = x * mask / (1 - p), 0 <= p < 1; element i is kept iff stream word i
// >= round(p * 2^32), so the keep rate is 1 - p to within 2^-33. Dropped elements are 0
// even where x is inf or NaN. The mask is not stored: dropoutBackward recomputes it, so
// record it with the same rng state contents, p and stream as the forward pass.
void dropout(vk::Recorder& rec, const TensorView& x, const TensorView& y, float p,
             const TensorView& rng, uint32_t stream = 0);
// dy, dx: same shape. dx (=|+=) dy * mask / (1 - p).
void dropoutBackward(vk::Recorder& rec, const TensorView& dy, const TensorView& dx, float p,
                     const TensorView& rng, uint32_t stream = 0, Write write = Write::Overwrite);

// The reparameterisation of a VAE's sample: mu, log_sigma, z: the same shape;
//   z = mu + exp(log_sigma) * eps,  eps element-wise the standard normals normal() draws
// (mean 0, stddev 1) for the same rng state and stream. eps is not stored:
// reparameterizeBackward draws it again, so record both with the same state and stream.
void reparameterize(vk::Recorder& rec, const TensorView& mu, const TensorView& log_sigma,
                    const TensorView& z, const TensorView& rng, uint32_t stream = 0);
// dz, log_sigma, dlog_sigma: the same shape; dlog_sigma (=|+=) dz * exp(log_sigma) * eps.
// (mu's gradient is dz itself.)
void reparameterizeBackward(vk::Recorder& rec, const TensorView& dz, const TensorView& log_sigma,
                            const TensorView& dlog_sigma, const TensorView& rng,
                            uint32_t stream = 0, Write write = Write::Overwrite);

// weights: (R,V) f32, non-negative (probabilities or unnormalised); out: (R) u32.
// out[r] = first j whose prefix sum of row r exceeds u_r * (row sum), u_r = stream word r.
// A row with no positive weight gives 0; negative weights count as 0.
void categorical(vk::Recorder& rec, const TensorView& weights, const TensorView& out,
                 const TensorView& rng, uint32_t stream = 0);

// Adds `steps` to the 64-bit offset of the rng state, on the device.
void rngAdvance(vk::Recorder& rec, const TensorView& rng, uint32_t steps = 1);

// Throws ShapeError unless rng is a u32 view of at least 4 words (for ops that draw from it).
void checkRngState(const char* op, const TensorView& rng);

// The dropout keep threshold the kernels compare stream words with: round(p * 2^32).
uint32_t dropoutThreshold(float p);

}  // namespace vkgrad::ops
