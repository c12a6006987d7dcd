// Layer norm over the last axis: the forward saves each row's mean and 1/std, the backward
// uses them for dx, dgamma and dbeta. Every tensor but the backward's scratch (f32) may be
// f32, f16 or bf16, each as its view says (mixed freely: f32 gamma and beta with bf16
// activations, say); the arithmetic and the statistics are f32 whatever they are stored in,
// and a 16-bit store rounds once, to nearest even. 16-bit tensors need the device's 16-bit
// storage and take the storage-buffer layouts (the *Texel variants read f32 only). Any view
// offset that is a multiple of its element size works.
#pragma once

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// Kernel layouts for rows longer than a few dozen elements (shorter rows always get one
// invocation each); as SoftmaxVariant in ops/softmax.h. Auto picks one per device.
enum class LayerNormVariant {
  Auto,              // layerNormVariantFor()
  WorkgroupStorage,  // 128 invocations per row, combined in shared memory; storage loads
  WorkgroupTexel,    // the same, x, gamma and beta read through R32F texel buffers (f32)
  // One subgroup per row: no shared memory, no barriers. Only for devices that run a
  // workgroup of subgroupSize invocations as one subgroup (CPU drivers); elsewhere the
  // output is NaN, never silently wrong.
  SubgroupStorage,
  SubgroupTexel,  // lavapipe, 4096 columns: 7-9x faster than WorkgroupStorage
};

const char* layerNormVariantName(LayerNormVariant variant);
// What Auto runs on this device: SubgroupTexel (SubgroupStorage where x, gamma and beta do
// not fit texel views) on CPU devices; on GPUs WorkgroupStorage, or SubgroupStorage for rows
// of up to kSubgroupRowsMaxN (ops/softmax.h) where the subgroup size is fixed.
LayerNormVariant layerNormVariantFor(const vk::Context& context, const TensorView& x,
                                     const TensorView& gamma, const TensorView& beta);

// The shape rule of layerNorm, Vulkan-free (the graph builder uses it too): x a non-empty
// (..., N) with rows and N within 32 bits, gamma and beta (N), eps finite and >= 0. Returns
// the shape of mean and rstd, (rows); y is shaped like x. Throws ShapeError
// "layerNorm: x (4,7) needs gamma (7), got (8)".
Shape layerNormStatsShape(const Shape& x, const Shape& gamma, const Shape& beta, float eps);

// x: (..., N); gamma, beta: (N); y: like x; mean, rstd: (rows), rows = numel / N (x's
// leading dims, e.g. (B,T) for x (B,T,C), are accepted too).
// y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps), var the biased (1/N)
// variance, computed in two passes so a large common offset does not cost precision.
// y may be x itself (in place, then of x's dtype); other overlaps are undefined. Throws
// ShapeError naming the shapes before recording anything on mismatched shapes, N or rows 0 or
// beyond 32 bits, eps < 0, or a buffer too small.
void layerNorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps = 1e-5f);
void layerNorm(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
               const TensorView& beta, const TensorView& y, const TensorView& mean,
               const TensorView& rstd, float eps, LayerNormVariant variant);

// How layerNormBackward sums dgamma and dbeta over rows (deterministic either way, no atomics).
enum class LayerNormParamsVariant {
  Auto,     // WithDx on CPU devices where it applies, else Columns there up to 16384 rows,
            // else Blocked (layer_norm.cpp, measured)
  Columns,  // one invocation per column over all rows: one dispatch, scratch unused. CPU
            // devices stop a shader after 65535 loop iterations, so there at most 16384 rows.
  Blocked,  // partial sums per block of rows into scratch, then a sum over blocks per column
  WithDx,   // Blocked's partial sums written by the dx kernel as it goes (x and dy read once
            // for both), then the sum over blocks: for the dx layout of one subgroup per row
            // with RGBA32F texels and N up to 32 per subgroup lane; elsewhere Blocked
};
const char* layerNormParamsVariantName(LayerNormParamsVariant variant);

// f32 elements of scratch layerNormBackward needs when it computes dgamma or dbeta.
int64_t layerNormBackwardScratch(int64_t rows, int64_t n);

// x, dy: (..., N) the forward's input and the gradient of its output; gamma: (N); mean, rstd:
// (rows) as the forward saved them. Each output is written (= or += for Write::Accumulate):
//   dx: like x      rstd * (g - mean_row(g) - xhat * mean_row(g * xhat)), g = dy * gamma,
//                   xhat = (x - mean) * rstd
//   dgamma: (N)     sum over rows of dy * xhat     (an empty view, buffer null: not computed)
//   dbeta: (N)      sum over rows of dy            (likewise optional)
// scratch: (>= layerNormBackwardScratch(rows, N)) f32, overwritten; needed only when dgamma or
// dbeta is computed. Outputs may not overlap each other or any input. Throws ShapeError naming
// the shapes before recording anything (also for dgamma or dbeta of more than 2^20 rows on a
// CPU device: loop limit).
// Precision: xhat uses the saved mean, so when |mean| >> std it inherits the mean's rounding,
// ulp(mean) / 2 * rstd: ~3e-5 of dx and dgamma for x = 1000 + N(0,1) with an f32 mean, 2^-9
// or 2^-12 of |mean| * rstd with a bf16 or f16 one (keep mean and rstd f32 for offset data).
void layerNormBackward(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                       const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                       const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                       const TensorView& scratch, Write w = Write::Overwrite);
// The same with dx written by dx_write and dgamma, dbeta by params_write (a residual
// stream's dx usually adds to a gradient while the parameters' are first written), and the
// kernel layouts chosen: variant for dx (as the forward's), params for dgamma and dbeta.
// dx_addend, if given (shaped like x, not overlapping dx), is added to dx too: the residual
// stream's gradient, in the same pass (dx = that + addend, or dx += both).
void layerNormBackward(vk::Recorder& rec, const TensorView& x, const TensorView& gamma,
                       const TensorView& mean, const TensorView& rstd, const TensorView& dy,
                       const TensorView& dx, const TensorView& dgamma, const TensorView& dbeta,
                       const TensorView& scratch, Write dx_write, Write params_write,
                       LayerNormVariant variant = LayerNormVariant::Auto,
                       LayerNormParamsVariant params = LayerNormParamsVariant::Auto,
                       const TensorView* dx_addend = nullptr);

}  // namespace vkgrad::ops
