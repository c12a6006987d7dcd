// Matrix multiply, row-major, fp32 sums: C = alpha·op(A)·op(B) + beta·C + bias, with op a
// transpose or not per operand, optionally batched; and its backward. Several kernel
// variants; the fastest shape differs by device (see docs/DESIGN.md), so Auto picks one per device.
// Every tensor may be stored in f32, f16 or bf16 (ops/storage.h) on the Naive, Tiled and Vector
// variants: the products, sums and epilogue are f32 and each output rounds once, on its store.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "vkgrad/ops/activation.h"
#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

enum class MatmulVariant {
  Auto,   // picked per device by matmulVariantFor(), or by the tensors' formats (below)
  Naive,  // one invocation per output; storage buffers; any float formats
  Tiled,  // shared-memory tiles + register blocking, scalar loads: the classic GPU kernel
  // Texel-buffer fetches, subgroup shuffles, no shared memory: SIMD CPUs. 16-bit operands
  // are fetched as 16-bit words and widened in the kernel.
  Texel,
  // Tiled with vec4 loads and vec4 shared reads, tile sizes by MatmulTiling: GPUs. A 16-bit
  // operand takes the one-element loads.
  Vector,
  // Cooperative matrices (tensor cores, VK_NV_cooperative_matrix): inputs rounded to fp16
  // (or stored as f16), sums in fp32; a and b f32 or f16, every other tensor f32. Only where
  // DeviceInfo::coopmat; Auto takes it for f16 operands, and for f32 ones where the Context
  // allows fp16 products (fp16Matmul()), where the other tensors are f32.
  Coopmat,
  // Coopmat's kernel on the emulated fragment layer (shaders/common/fragment.glsl: plain
  // GLSL, virtual warps of 32 invocations, fragments in a scrambled order), with Coopmat's
  // tiling, staging, barriers, formats and fp16 rounding, on any device with fp16 arithmetic
  // and 16-bit storage: the tensor-core algorithm's tests on lavapipe. Slow; Auto never takes it.
  CoopmatEmulated,
};

// The Vector variant's tile: (wx, wy) invocations, each owning tm x tn outputs, over k steps
// of bk; a workgroup covers (wy·tm) x (wx·tn) of C. tm, tn and bk are multiples of 4. All
// zero: matmulTilingFor picks one per product.
// The Coopmat variants': (wx, wy) warps (subgroups; 32 invocations emulated), each owning
// tm x tn fragments of 16x16, over k steps of bk (a multiple of 16); a workgroup covers
// (wy·tm·16) x (wx·tn·16) of C.
struct MatmulTiling {
  uint32_t wx = 0, wy = 0, bk = 0, tm = 0, tn = 0;
  bool empty() const { return wx == 0; }
};
// "16x16x16x8x8": wx x wy x bk x tm x tn, as benchmarks print and take it.
std::string matmulTilingText(const MatmulTiling& t);
// The Vector tile for an (M,N) product of `batch` entries on this device: the largest of
// 64x128 (16x16 invocations of 4x8), 64x64 (16x16 of 4x4) and 32x64 (16x8 of 4x4) whose
// workgroups still fill a large GPU (BENCHMARKS.md, matmul on the GPU). `sixteen`: some
// tensor of the product is f16 or bf16 (the kernel's .s16 build), which never takes 4x8.
MatmulTiling matmulTilingFor(const vk::Context& context, int64_t m, int64_t n, int64_t batch,
                             bool sixteen = false);
// The Coopmat tile for such a product: 128x128 where that still makes a workgroup per
// multiprocessor of a large GPU, else 64x64.
MatmulTiling matmulCoopmatTilingFor(const vk::Context& context, int64_t m, int64_t n,
                                    int64_t batch);

const char* matmulVariantName(MatmulVariant variant);
// The variant Auto resolves to on this device for f32 operands: Texel on CPU devices with
// subgroup shuffle, Coopmat where the device has it and the Context allows fp16 products,
// Vector elsewhere. (Auto also takes Tiled for an operand too large for a texel view,
// Vector for tensors Coopmat cannot take (bf16, or a 16-bit output), and Vector's split-K
// for a Coopmat product too small to fill the GPU.)
MatmulVariant matmulVariantFor(const vk::Context& context);

struct MatmulOptions {
  bool trans_a = false;  // op(A) = Aᵀ: a is stored (K,M) instead of (M,K)
  bool trans_b = false;  // op(B) = Bᵀ: b is stored (N,K) instead of (K,N)
  float alpha = 1.0f;    // scales op(A)·op(B), not the bias
  float beta = 0.0f;     // 0: c is only written (its old contents, NaN included, are ignored)
  const TensorView* bias = nullptr;  // (N), added to every row of C
  // Shaped like C and added to it after the bias: a residual connection's add (x + proj(h)),
  // in the kernel's epilogue instead of a pass of its own: Texel's before beta·C, Naive's,
  // Tiled's and Vector's after it (the same within rounding); Coopmat and a split-K product
  // add it in a pass after (split-K with f32 C and residual only; Coopmat then rounds a
  // 16-bit C twice, the product's store and the sum's), as do Naive, Tiled and Vector on a
  // device that binds fewer than 5 storage buffers per stage (their ".sb4" builds: the same
  // bits for an f32 C). It may not overlap C.
  const TensorView* residual = nullptr;
  // An activation applied on the way out (an MLP's hidden layer): c = f(alpha·op(A)·op(B) +
  // bias), and, where act_pre is given (shaped like c, not overlapping it), the value before f
  // stored there too, for f's backward. The Texel kernel applies f in its epilogue (the bits
  // of ops::activation after the product); the other variants write the product to act_pre
  // (or c) and run that pass after. Not with beta or a residual.
  std::optional<Activation> act;
  float act_param = 0.0f;
  const TensorView* act_pre = nullptr;
  MatmulVariant variant = MatmulVariant::Auto;
  // Vector's tile (with Auto too, where it resolves to Vector), or Coopmat's where that
  // variant is named; empty: matmulTilingFor / matmulCoopmatTilingFor.
  MatmulTiling tiling;
  // f32 scratch for split-K (below), at least matmulScratch (matmulBackwardScratch for the
  // backward) elements; null: no split. Only the Vector variant splits (Auto's Coopmat hands
  // such a product to it), and only a product with no bias and beta 0 or 1, so elsewhere it
  // is left untouched.
  const TensorView* scratch = nullptr;
};

// Split-K. A product whose C has too few tiles to fill a large GPU (a weight gradient: C is
// (in, out) while K is every row of the batch, 100,000 nodes of a graph say) runs as S
// partial products over consecutive slices of K, one workgroup batch entry each, into scratch
// (S, M, N), and then a fixed-order sum of the S partials into C: the same bits every run, no
// atomics. S depends on the shape alone; 1: no split. Vulkan-free, so the graph sizes its
// scratch before it meets a device.
int64_t matmulSplitK(int64_t m, int64_t n, int64_t k, int64_t batch);
// f32 elements of scratch a product (M,N) over K of `batch` entries splits into: S·M·N, or 0.
int64_t matmulScratch(int64_t m, int64_t n, int64_t k, int64_t batch);
// The same for matmulBackward's gradient of a (for_a) or of b: the most any product it
// records for that gradient may split into (the shapes are matmul's, checked by matmulShape).
int64_t matmulBackwardScratch(const Shape& a, const Shape& b, bool trans_a, bool trans_b,
                              bool for_a);

// The shape rule of matmul, Vulkan-free (the graph builder uses it too): op(a)·op(b) is (M,N)
// when both are 2-D, else (B,M,N); bias, if given, must be (N). Throws ShapeError
// "matmul: (4,8) x (9,2): inner dims differ (8 vs 9)" ("(8,4)^T" for a transposed operand).
Shape matmulShape(const Shape& a, const Shape& b, bool trans_a = false, bool trans_b = false,
                  const Shape* bias = nullptr);

// a: (M,K) or (Ba,M,K), b: (K,N) or (Bb,K,N) (the last two dims swapped where transposed),
// c: (M,N) when both are 2-D, else (B,M,N) with Ba, Bb each B or 1; a 2-D operand or a batch of
// 1 is broadcast over the batch (e.g. activations (B,T,C) x a shared weight (C,N)).
// Any M,N,K >= 1 and any offsets that are multiples of 4 bytes (2 for a 16-bit view); c may not
// overlap a, b or bias. a, b, c, bias, the residual and act_pre are each f32, f16 or bf16 on the
// Naive, Tiled, Vector and Texel variants (a 16-bit one needs the device's 16-bit storage);
// Coopmat takes f32 or f16 a and b (rounding f32 ones to fp16) and any format for the rest
// (Auto picks it where an operand is f16, none is bf16 and the device has it, else the
// device's variant). scratch is f32.
// Throws ShapeError (matmulShape's, or "matmul: (M,K) x (K,N) -> (c): c must be ...")
// before recording anything if the shapes disagree or a buffer is too small, or if Coopmat is
// asked for with formats it does not take; Error if Texel is asked for on a device without
// subgroup shuffle or with an operand larger than a texel view may be; if Coopmat is asked for on a
// device without cooperative matrices; if a tiling cannot run; if a 16-bit tensor meets a device
// without 16-bit storage.
void matmul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& c,
            const MatmulOptions& options = {});
// The plain product C = A·B (2-D or batched as above) with a chosen variant.
void matmul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& c,
            MatmulVariant variant);

// The gradients that matmulBackward writes; null ones are skipped.
struct MatmulGrads {
  const TensorView* da = nullptr;     // shaped like a
  const TensorView* db = nullptr;     // shaped like b
  const TensorView* dbias = nullptr;  // (N): column sums of dc over every row and batch
  std::optional<Write> dbias_write;   // how dbias writes, if not as da and db do
  // da = f'(x) ⊙ (alpha·dC·B̂ᵀ) instead: the backward of an activation y = f(x) whose output
  // was a, folded into da's product, so dy is never stored (the Texel variant applies f' in
  // its epilogue; others make a pass over da after). x is shaped like a, f a kind whose
  // derivative reads x (activationBackwardReadsX); a not transposed, w Overwrite.
  const TensorView* da_act_x = nullptr;
  Activation da_act = Activation::GeluTanh;
  float da_act_param = 0.0f;
};

// Backward of matmul(a, b, c, forward) given dc (shaped like c): with Â = op(A), B̂ = op(B),
//   dÂ = alpha·dC·B̂ᵀ, dB̂ = alpha·Âᵀ·dC (stored transposed where op is), dbias = Σ rows of dC;
// a broadcast operand's gradient sums over the batch. The same kernels as the forward, with
// transpose flags; forward.bias and forward.beta do not matter here. Accumulate adds to the
// gradients. Every tensor in any float format as for matmul (dc is an operand here, da and db
// outputs): sums in f32, one rounding per store, except a broadcast operand's gradient whose
// batch does not fold into one product: one accumulating product per batch entry, so a 16-bit
// gradient rounds once per entry. With db and dbias both asked for, the Texel variant sums
// dbias in db's dispatch (b not transposed, db one product); otherwise dbias is a pass of its
// own. Same shape rules and errors as matmul; gradients may not overlap any input.
void matmulBackward(vk::Recorder& rec, const TensorView& a, const TensorView& b,
                    const TensorView& dc, const MatmulGrads& grads,
                    const MatmulOptions& forward = {}, Write w = Write::Overwrite);

}  // namespace vkgrad::ops
