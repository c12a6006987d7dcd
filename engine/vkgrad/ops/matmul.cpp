// The host side of every matmul variant (naive, tiled, texel, vector, coopmat), forward and
// backward. About 1,100 lines on purpose for now, not split: the five variants share one
// description of a product (Operand, Product, Choice), the push constants, split-K and the
// backward's gradient products, all in this file's anonymous namespace. Moving the Texel and
// Coopmat launchers out (~200 lines) first needs those types in an internal header
// (ops/matmul_product.h); that is the next step, when another variant (a matrix-vector
// kernel for decoding) arrives.
#include "vkgrad/ops/matmul.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/activation.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/elementwise.h"
#include "vkgrad/ops/reduce.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// op(A)[z][m][k] = a[a_off + z*a_sb + m*a_sm + k*a_sk] and op(B)[z][k][n] likewise, in
// elements from the start of each binding; C is contiguous (batch,M,N) from c_off.
struct MatmulPush {
  uint32_t m, n, k;
  uint32_t a_off, a_sm, a_sk, a_sb;
  uint32_t b_off, b_sk, b_sn, b_sb;
  uint32_t c_off;
  uint32_t bias_off, has_bias;  // bias: (N) from bias_off
  float alpha, beta;            // beta == 0: C is not read
  uint32_t k_chunk;             // Vector only: split-K's slice of K per batch entry; 0: none
  uint32_t colsum_off;          // Texel only: op(B)'s column sums (N) from colsum_off, if any
  float colsum_beta;            // 0: they are written, 1: added
  uint32_t epi_off;  // Texel only: the epilogue's operand (activation x or residual), from epi_off
  float act_param;
  uint32_t pre_off;  // Texel only: an applied activation's input, from pre_off, if stored
};
static_assert(sizeof(MatmulPush) == 88);

// Vector variant: workgroups a product should have before a larger tile is worth it: a few
// per multiprocessor of a large GPU (132 on an H100), so none idles while the last wave runs.
constexpr int64_t kWorkgroupsToFill = 264;

// Split-K (ops/matmul.h): products with fewer tiles of the smallest Vector tile (32x64) than
// half of kWorkgroupsToFill split K into enough slices to make kWorkgroupsToFill workgroups,
// each slice at least kSplitMinChunk deep and a multiple of kSplitAlign (the BK of every tile
// matmulTilingFor picks, and a multiple of 4, which keeps the vec4 loads aligned).
constexpr int64_t kSplitTileRows = 32, kSplitTileCols = 64;
constexpr int64_t kSplitMinChunk = 128, kSplitAlign = 16;

struct Split {
  int64_t parts = 1, chunk = 0;  // parts slices of chunk along K (the last may be shorter)
};

int64_t divUp(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

Split splitFor(int64_t m, int64_t n, int64_t k, int64_t batch) {
  const int64_t tiles = divUp(m, kSplitTileRows) * divUp(n, kSplitTileCols);
  if (batch != 1 || 2 * tiles >= kWorkgroupsToFill) return {1, k};
  const int64_t wanted = std::min(divUp(kWorkgroupsToFill, tiles), k / kSplitMinChunk);
  if (wanted < 2) return {1, k};
  const int64_t chunk = divUp(divUp(k, wanted), kSplitAlign) * kSplitAlign;
  const int64_t parts = divUp(k, chunk);
  return parts < 2 ? Split{1, k} : Split{parts, chunk};
}

// Texel variant: rows of C per workgroup, and columns per lane (see shaders/matmul/texel.comp).
constexpr uint32_t kTexelRows = 16, kTexelLaneColumns = 8;
// Fewer rows per workgroup for a product of fewer rows (its TM): one-row decoding steps.
uint32_t texelRows(uint32_t m) {
  return m >= kTexelRows ? kTexelRows : std::bit_ceil(std::max(m, 1u));
}

// One operand of a product as the kernels address it: a (batch, rows, cols) array of
// elements of `view`, element (z, r, c) at start + z*s_batch + r*s_row + c*s_col. Transposes
// and broadcasts (s_batch = 0) are only strides.
struct Operand {
  TensorView view;
  uint64_t start = 0;
  int64_t rows = 0, cols = 0;
  int64_t s_row = 0, s_col = 0, s_batch = 0;
};

Operand transposed(Operand x) {
  std::swap(x.rows, x.cols);
  std::swap(x.s_row, x.s_col);
  return x;
}

// op(t) for a 2-D or 3-D row-major tensor; a 2-D tensor or a batch of 1 broadcasts.
Operand operand(const TensorView& t, bool trans) {
  const int r = t.shape.rank();
  const int64_t rows = t.shape[r - 2], cols = t.shape[r - 1];
  const int64_t batch_stride = r == 3 && t.shape[0] > 1 ? rows * cols : 0;
  const Operand x{t, 0, rows, cols, cols, 1, batch_stride};
  return trans ? transposed(x) : x;
}

// An activation's derivative applied to a product on its way out: C = f'(x) ⊙ C, x laid out
// as C (MatmulGrads::da_act_x, da_act, da_act_param).
struct ActGrad {
  const TensorView* x;
  Activation kind;
  float param;
};

// An activation applied to a product on its way out: C = f(C), with C before f stored to pre
// where given (MatmulOptions::act, act_param, act_pre).
struct ActForward {
  Activation kind;
  float param;
  const TensorView* pre;
};

// c (batch, a.rows, b.cols), contiguous, = alpha·A·B + beta·c + bias.
struct Product {
  Operand a, b;
  TensorView c;
  int64_t batch = 1;
  const TensorView* bias = nullptr;
  float alpha = 1.0f, beta = 0.0f;
  const TensorView* scratch = nullptr;  // split-K's, if any (MatmulOptions::scratch)
  // Texel only, one batch entry: op(B)'s column sums over K written (or added, colsum_beta 1)
  // to colsum (N) by the same dispatch (the bias gradient beside a weight gradient).
  const TensorView* colsum = nullptr;
  float colsum_beta = 0.0f;
  // Texel only: C = f'(x) ⊙ alpha·op(A)·op(B); beta 0, no bias and no residual.
  const ActGrad* act = nullptr;
  // Laid out as C and added to it after the bias (MatmulOptions::residual): the Texel kernel
  // adds it in its epilogue, the other variants in a pass after the product.
  const TensorView* residual = nullptr;
  // Texel only: C = f(alpha·op(A)·op(B) + bias); beta 0, no residual, no activation gradient.
  const ActForward* act_fwd = nullptr;
};

bool isHalf(const TensorView& t) {
  return t.dtype == DType::F16;
}

// What a product's tensors are stored in, as far as the choice of kernel goes (resolve).
struct Formats {
  bool sixteen = false;  // some tensor is f16 or bf16: the kernels' ".s16" builds
  bool half = false;     // an operand is f16: Auto takes Coopmat where the device has it
  bool coopmat = true;   // the Coopmat kernel takes them: operands f32 or f16
};

// operands: read as A or B of a product (the Coopmat kernel takes f32 or f16 there); others:
// the tensors written or read besides them (every kernel takes any format). Null ones are
// skipped.
Formats formatsOf(std::initializer_list<const TensorView*> operands,
                  std::initializer_list<const TensorView*> others) {
  Formats f;
  for (const TensorView* t : operands) {
    if (!t) continue;
    f.sixteen = f.sixteen || t->dtype != DType::F32;
    f.half = f.half || isHalf(*t);
    f.coopmat = f.coopmat && (t->dtype == DType::F32 || isHalf(*t));
  }
  for (const TensorView* t : others) f.sixteen = f.sixteen || (t && t->dtype != DType::F32);
  return f;
}

std::string describe(const Shape& s, bool trans) {
  return s.str() + (trans ? "^T" : "");
}
std::string describe(const TensorView& t, bool trans) {
  return describe(t.shape, trans);
}

struct Dims {
  int64_t m, n, k, batch;
};

// Shapes of matmul(a, b, c) (c is dc for the backward); throws before any GPU work.
Dims checkShapes(const vk::Context& context, const TensorView& a, const TensorView& b,
                 const TensorView& c, const MatmulOptions& o, const char* c_name) {
  const Shape want = matmulShape(a.shape, b.shape, o.trans_a, o.trans_b);
  const std::string shapes = "matmul: " + describe(a, o.trans_a) + " x " + describe(b, o.trans_b) +
                             " -> " + c.shape.str() + ": ";
  auto fail = [&](const std::string& why) { throw ShapeError(shapes + why); };
  if (!(c.shape == want)) fail(std::string(c_name) + " must be " + want.str());
  const int64_t batch = want.rank() == 3 ? want[0] : 1;
  if (uint64_t(batch) > context.info().max_workgroup_count[2])
    fail("a batch of " + std::to_string(batch) + " is more than the device's " +
         std::to_string(context.info().max_workgroup_count[2]) + " workgroups along z");
  // Any float format (resolve() picks a kernel that reads it).
  checkFloatOperand("matmul", "a", a);
  checkFloatOperand("matmul", "b", b);
  checkFloatOperand("matmul", c_name, c);
  const int r = want.rank();
  const int64_t k = o.trans_a ? a.shape[a.shape.rank() - 2] : a.shape[a.shape.rank() - 1];
  return {want[r - 2], want[r - 1], k, batch};
}

// A gradient must have its input's shape (want), fit its buffer and overlap no input.
void checkGradient(const char* name, const TensorView* grad, bool shape_ok, const std::string& want,
                   const TensorView& a, const TensorView& b, const TensorView& dc) {
  if (!grad) return;
  if (!shape_ok)
    throw ShapeError(std::string("matmul backward: ") + name + " " + grad->shape.str() +
                     " must be " + want);
  checkFloatOperand("matmul backward", name, *grad);
  checkAlias("matmul backward", name, *grad, "a", a, false);
  checkAlias("matmul backward", name, *grad, "b", b, false);
  checkAlias("matmul backward", name, *grad, "dc", dc, false);
}

// Split-K's scratch must be f32 (the partial products keep f32 sums) in its buffer and overlap
// no operand.
void checkScratch(const char* op, const TensorView* scratch,
                  std::initializer_list<std::pair<const char*, const TensorView*>> operands) {
  if (!scratch) return;
  checkOperand(op, "scratch", *scratch);
  for (const auto& [name, t] : operands)
    if (t) checkAlias(op, "scratch", *scratch, name, *t, false);
}

bool canShuffle(const vk::DeviceInfo& info) {
  return info.subgroup_compute && info.subgroup_shuffle && info.subgroup_size > 0;
}

// The kernel a product runs with: the variant, Auto resolved, and Vector's tiling if set.
struct Choice {
  MatmulVariant variant;
  MatmulTiling tiling;
  uint32_t k_chunk = 0;    // Vector: a split-K slice per batch entry (recordSplit); 0: none
  bool automatic = false;  // Auto picked the variant (Coopmat may then hand over to split-K)
};

bool isCoopmat(MatmulVariant variant) {
  return variant == MatmulVariant::Coopmat || variant == MatmulVariant::CoopmatEmulated;
}

// The emulated fragment layer's virtual warp (shaders/common/fragment.glsl).
constexpr uint32_t kEmulatedWarp = 32;

// Lanes of a warp in the Coopmat kernel: the device's subgroup, or a virtual warp.
uint32_t coopmatLanes(const vk::DeviceInfo& info, bool emulated) {
  return emulated ? kEmulatedWarp : info.subgroup_size;
}

// The Coopmat kernel's shared memory for a tiling: two buffers of each fp16 tile, A (BM, BK)
// and B (BK, BN), rows padded by 8 halves, and a 16x16 fp32 fragment per warp; emulated, the
// fragment layer's 512 halves per warp too.
uint64_t coopmatShared(const MatmulTiling& t, bool emulated) {
  const uint64_t bm = uint64_t(t.wy) * t.tm * 16, bn = uint64_t(t.wx) * t.tn * 16;
  const uint64_t per_warp = 4 * 256 + (emulated ? 2 * 512 : 0);
  return 2 * 2 * (bm * (t.bk + 8) + t.bk * (bn + 8)) + per_warp * t.wx * t.wy;
}

// Whether the Coopmat tiling can run on this device and keeps coopmat.comp's rules.
bool coopmatTilingFits(const vk::DeviceInfo& info, const MatmulTiling& t, bool emulated) {
  const uint64_t threads = uint64_t(t.wx) * t.wy * coopmatLanes(info, emulated);
  return t.wx > 0 && t.wy > 0 && t.bk > 0 && t.tm > 0 && t.tn > 0 && t.bk % 16 == 0 &&
         t.tm * t.tn <= 32 && threads <= info.max_workgroup_invocations &&
         threads <= info.max_workgroup_size[0] &&
         coopmatShared(t, emulated) <= info.max_shared_memory;
}

// Throws unless coopmatTilingFits.
void checkCoopmatTiling(const vk::Context& context, const MatmulTiling& t, bool emulated) {
  const vk::DeviceInfo& info = context.info();
  if (!coopmatTilingFits(info, t, emulated))
    throw Error("matmul: coopmat tiling " + matmulTilingText(t) + (emulated ? " (emulated)" : "") +
                " cannot run on " + info.label() +
                ": bk must be a multiple of 16, tm*tn at most 32 fragments, wx*wy warps of " +
                std::to_string(coopmatLanes(info, emulated)) + " at most " +
                std::to_string(info.max_workgroup_invocations) +
                " invocations, and the tiles at most " + std::to_string(info.max_shared_memory) +
                " bytes of shared memory (this one " + std::to_string(coopmatShared(t, emulated)) +
                ")");
}

// Throws if the tiling cannot run on this device (or breaks vector.comp's rules).
void checkTiling(const vk::Context& context, const MatmulTiling& t) {
  const vk::DeviceInfo& info = context.info();
  const uint64_t shared = 4ull * t.bk * (t.wy * t.tm + t.wx * t.tn);
  const bool ok = t.wx > 0 && t.wy > 0 && t.bk > 0 && t.tm > 0 && t.tn > 0 && t.bk % 4 == 0 &&
                  t.tm % 4 == 0 && t.tn % 4 == 0 && t.tm * t.tn <= 256 &&
                  t.wx <= info.max_workgroup_size[0] && t.wy <= info.max_workgroup_size[1] &&
                  t.wx * t.wy <= info.max_workgroup_invocations && shared <= info.max_shared_memory;
  if (!ok)
    throw Error("matmul: tiling " + matmulTilingText(t) + " cannot run on " + info.name +
                ": bk, tm and tn must be multiples of 4, tm*tn at most 256, wx*wy at most " +
                std::to_string(info.max_workgroup_invocations) +
                " invocations, and the tiles at most " + std::to_string(info.max_shared_memory) +
                " bytes of shared memory");
}

// A tiling given with the options, checked for the kernel that will run it.
void checkTilingFor(const vk::Context& context, const Choice& choice) {
  if (choice.tiling.empty()) return;
  if (isCoopmat(choice.variant))
    checkCoopmatTiling(context, choice.tiling, choice.variant == MatmulVariant::CoopmatEmulated);
  else
    checkTiling(context, choice.tiling);
}

// The variant to run with, Auto resolved; throws if Texel cannot read every operand (too
// large for a texel view), or Coopmat cannot run or take the formats. Auto: Coopmat for an
// f16 operand (as for f32 ones where the Context allows fp16 products) where the device has
// it and the formats suit it, else the device's choice, with Tiled for Texel where an
// operand is too large for a texel view.
MatmulVariant resolve(const vk::Context& context, MatmulVariant variant,
                      std::initializer_list<const TensorView*> texel_operands, const Formats& f) {
  const vk::DeviceInfo& info = context.info();
  // One-component views are the Texel variant's largest.
  bool fit = true;
  for (const TensorView* t : texel_operands)
    fit = fit && texelFits(context, *t, texelFormat(t->dtype, false, f.sixteen));
  if (variant == MatmulVariant::Auto) {
    if (info.coopmat && f.coopmat && (f.half || context.fp16Matmul()))
      return MatmulVariant::Coopmat;
    variant = matmulVariantFor(context);
    if (variant == MatmulVariant::Coopmat) variant = MatmulVariant::Vector;
    if (variant == MatmulVariant::Texel && !fit) variant = MatmulVariant::Tiled;
  }
  if (isCoopmat(variant)) {
    if (!f.coopmat)
      throw ShapeError(
          "matmul: the coopmat variant reads a and b in f32 or f16; the naive, tiled, vector "
          "and texel variants take bf16 operands");
    if (variant == MatmulVariant::CoopmatEmulated) {
      if (!info.fp16 || !info.storage_16bit)
        throw Error(
            "matmul: the emulated coopmat variant needs shaderFloat16 (fp16 arithmetic) and "
            "storageBuffer16BitAccess (16-bit storage), which " +
            info.label() + " does not offer");
      return variant;
    }
    if (!info.coopmat)
      throw Error(
          "matmul: the coopmat variant needs cooperative matrices (VK_NV_cooperative_matrix "
          "with a 16x16x16 fp16 x fp16 + fp32 subgroup shape, fp16 arithmetic, 16-bit storage, "
          "the Vulkan memory model and a fixed subgroup size), which " +
          info.name + " lacks" + (context.ownsDevice() ? "" : " or the engine did not create"));
    return variant;
  }
  if (variant != MatmulVariant::Texel) return variant;
  if (!canShuffle(info))
    throw Error("matmul: the texel variant needs subgroup shuffle in compute shaders, which " +
                info.name + " lacks");
  if (!fit)
    throw Error("matmul: an operand has more elements than a texel view of " + info.name +
                " can hold; use the tiled variant");
  return variant;
}

// The kernel for these options: the variant resolved and the tiling checked for it. A tiling
// given with Auto is Vector's: where Auto resolves to Coopmat (fp16 products allowed) it is
// left out rather than read as a Coopmat tile.
Choice choose(const vk::Context& context, const MatmulOptions& o,
              std::initializer_list<const TensorView*> operands, const Formats& formats) {
  const bool automatic = o.variant == MatmulVariant::Auto;
  Choice choice{resolve(context, o.variant, operands, formats), o.tiling, 0, automatic};
  if (automatic && choice.variant == MatmulVariant::Coopmat) choice.tiling = {};
  checkTilingFor(context, choice);
  return choice;
}

MatmulPush pushFor(const Product& p, uint32_t a_off, uint32_t b_off, uint32_t c_off,
                   uint32_t bias_off) {
  MatmulPush push{};
  push.m = uint32_t(p.a.rows), push.n = uint32_t(p.b.cols), push.k = uint32_t(p.a.cols);
  push.a_off = a_off, push.a_sm = uint32_t(p.a.s_row), push.a_sk = uint32_t(p.a.s_col);
  push.a_sb = uint32_t(p.a.s_batch);
  push.b_off = b_off, push.b_sk = uint32_t(p.b.s_row), push.b_sn = uint32_t(p.b.s_col);
  push.b_sb = uint32_t(p.b.s_batch);
  push.c_off = c_off;
  push.bias_off = bias_off, push.has_bias = p.bias ? 1 : 0;
  push.alpha = p.alpha, push.beta = p.beta;
  return push;
}

void record(vk::Recorder& rec, Product p, const Choice& choice);

// Split-K for the Vector variant (ops/matmul.h): the slices of K as a batch of partial products
// into scratch, then their sum in order. False (nothing recorded) where the product does not
// split: no scratch or too little, a batch, a bias, or a beta other than 0 and 1; or a
// residual with C or itself 16-bit, which the kernel's epilogue adds with one rounding.
bool recordSplit(vk::Recorder& rec, const Product& p, const Choice& choice) {
  if (!p.scratch || p.batch != 1 || p.bias || (p.beta != 0.0f && p.beta != 1.0f)) return false;
  if (p.residual && (p.c.dtype != DType::F32 || p.residual->dtype != DType::F32)) return false;
  const int64_t m = p.a.rows, n = p.b.cols, k = p.a.cols;
  const Split split = splitFor(m, n, k, 1);
  if (split.parts < 2 || p.scratch->shape.numel() < split.parts * m * n) return false;
  // Slice z of K: op(A)'s columns and op(B)'s rows from z·chunk, through the batch strides.
  Product part = p;
  part.a.s_batch = split.chunk * p.a.s_col;
  part.b.s_batch = split.chunk * p.b.s_row;
  part.batch = split.parts;
  const TensorView partials = view(*p.scratch->buffer, {split.parts, m, n}, p.scratch->offset);
  part.c = partials;
  part.alpha = 1.0f, part.beta = 0.0f;
  part.scratch = nullptr;
  part.residual = nullptr;  // added to C after the sum (the caller)
  Choice sliced = choice;
  sliced.k_chunk = uint32_t(split.chunk);
  record(rec, part, sliced);
  sumOverKeptAxis(rec, "matmul", partials, nullptr, p.c, KeptAxis{split.parts, m * n, 1}, p.alpha,
                  p.beta != 0.0f ? Write::Accumulate : Write::Overwrite);
  return true;
}

// A batch over a broadcast B with A's batches back to back, as one taller product (B·M rows),
// which fills the texel and tiled kernels' row tiles better.
Product withBatchAsRows(Product p) {
  if (p.batch > 1 && p.b.s_batch == 0 && p.a.s_batch == p.a.rows * p.a.s_row) {
    p.a.rows *= p.batch;
    p.a.s_batch = 0;
    p.batch = 1;
  }
  return p;
}

// The deepest K one dispatch of `variant` may loop over on this device: 0 (any) on a GPU. A
// CPU device ends an invocation after 65,535 loop iterations and keeps what it has (llvmpipe:
// ops/binding.h); the Naive kernel loops once per k, the Tiled and Vector kernels about as
// often, the Texel kernel once per four (on lavapipe: Naive and Vector wrong at K = 70,001,
// Texel at 280,001 and right at 140,001). A deeper product runs as products over slices of K,
// each adding to C (recordDepthSlices), with the fused epilogues that cannot add up (column
// sums, activations) left to passes of their own.
int64_t cpuDepthLimit(const vk::DeviceInfo& info, MatmulVariant variant) {
  if (!info.isCpu()) return 0;
  if (variant == MatmulVariant::Texel) return int64_t(4 * kCpuLaneSteps);
  // Tiled on fewer than 256 invocations takes 8x8 threads of 8x8 outputs: each loads four
  // times the tile elements per k and was still wrong at slices of 32,768 (small-workgroups
  // profile on lavapipe).
  if (variant == MatmulVariant::Tiled && info.max_workgroup_invocations < 256)
    return int64_t(kCpuLaneSteps / 4);
  return int64_t(kCpuLaneSteps);
}
bool slicesDepth(const vk::Context& context, MatmulVariant variant, int64_t k) {
  const int64_t limit = cpuDepthLimit(context.info(), variant);
  return limit > 0 && k > limit;
}

// The epilogues the Texel kernel combines (logic errors: the callers never ask for others).
void checkTexelEpilogue(const Product& p) {
  if (p.colsum && p.batch != 1) throw std::logic_error("matmul: column sums of a batch");
  if (p.act && (p.beta != 0.0f || p.bias || p.residual || p.act_fwd))
    throw std::logic_error("matmul: an activation gradient with beta, a bias or a residual");
  if (p.act_fwd && (p.beta != 0.0f || p.residual))
    throw std::logic_error("matmul: an applied activation with beta or a residual");
}

// How the Texel kernel fetches A and B (its A_VEC4, B_VEC4, B_KVEC4, A_MVEC4), with their first
// elements a_off and b_off into their bindings. Whole-vec4 fetches need 4 contiguous elements
// per fetch and every row to start on a texel; otherwise that operand is read through a
// one-component view, four scalar fetches per vec4 (see texel.comp).
struct FetchModes {
  bool a_vec4, b_vec4, b_kvec4, a_mvec4;
};
FetchModes fetchModes(const Product& p, uint32_t a_off, uint32_t b_off) {
  const int64_t m = p.a.rows, n = p.b.cols;
  FetchModes f{};
  f.a_vec4 = p.a.s_col == 1 && p.a.s_row % 4 == 0 && p.a.s_batch % 4 == 0 && a_off % 4 == 0;
  f.b_vec4 =
      p.b.s_col == 1 && p.b.s_row % 4 == 0 && p.b.s_batch % 4 == 0 && b_off % 4 == 0 && n % 4 == 0;
  // A transposed B with K % 4 == 0: whole-vec4 fetches along k instead.
  f.b_kvec4 =
      !f.b_vec4 && p.b.s_row == 1 && p.b.s_col % 4 == 0 && p.b.s_batch % 4 == 0 && b_off % 4 == 0;
  // A transposed A with M % 4 == 0: whole-vec4 fetches along m.
  f.a_mvec4 = !f.a_vec4 && p.a.s_row == 1 && p.a.s_col % 4 == 0 && p.a.s_batch % 4 == 0 &&
              a_off % 4 == 0 && m % 4 == 0;
  return f;
}

// The Texel kernel (one subgroup per workgroup, texel fetches, its own epilogues), all of p;
// bias is bias_view bound (the real bias or its stand-in).
void recordTexel(vk::Recorder& rec, const Product& p, const TensorView& bias_view,
                 const Bound& bias) {
  vk::Context& context = rec.context();
  const vk::DeviceInfo& info = context.info();
  const uint32_t m = uint32_t(p.a.rows), n = uint32_t(p.b.cols);
  const TensorView c = p.c;
  checkTexelEpilogue(p);
  // The epilogue's operand, laid out as C: the activation gradient's x or the residual;
  // without either the binding is a stand-in, A's view, never fetched.
  const TensorView* epi_view = p.act ? p.act->x : p.residual;
  // An applied activation's input, laid out as C; without one the binding is a stand-in,
  // C's view, never written.
  const TensorView& pre_view = p.act_fwd && p.act_fwd->pre ? *p.act_fwd->pre : c;
  // Without column sums the binding is a stand-in: C's first element, written anyway.
  const TensorView colsum_view = p.colsum ? *p.colsum : view(*c.buffer, {1}, c.offset, c.dtype);
  const TensorView& epi_or_a = epi_view ? *epi_view : p.a.view;
  // Any 16-bit tensor selects the ".s16" build, which reads all three operands as words.
  bool s16 = false;
  for (const TensorView* t :
       {&p.a.view, &p.b.view, &c, &bias_view, &colsum_view, &epi_or_a, &pre_view})
    s16 = s16 || t->dtype != DType::F32;

  Bound ba = bindTexel(context, p.a.view, texelFormat(p.a.view.dtype, false, s16));
  Bound bb = bindTexel(context, p.b.view, texelFormat(p.b.view.dtype, false, s16));
  const Bound bc = bindStorage(context, c);
  const uint32_t a_off = ba.skip + uint32_t(p.a.start), b_off = bb.skip + uint32_t(p.b.start);
  const auto [a_vec4, b_vec4, b_kvec4, a_mvec4] = fetchModes(p, a_off, b_off);
  if (a_vec4 || a_mvec4) ba.arg.texel = texelFormat(p.a.view.dtype, true, s16);
  if (b_vec4 || b_kvec4) bb.arg.texel = texelFormat(p.b.view.dtype, true, s16);
  // The workgroup is exactly one subgroup. For SPIR-V below 1.6 (ours is 1.5, Vulkan 1.2)
  // and no subgroup-size-control flags, compute runs with the reported subgroupSize.
  const uint32_t sg = info.subgroup_size;
  const Bound pre = bindStorage(context, pre_view);
  // 16-byte stores of C (and pre) where both are f32 and every row starts on 4 elements.
  const bool c_vec4 = n % 4 == 0 && bc.skip % 4 == 0 && pre.skip % 4 == 0 &&
                      c.dtype == DType::F32 && pre_view.dtype == DType::F32;
  const Bound colsum = bindStorage(context, colsum_view);
  Bound epi = bindTexel(context, epi_or_a, texelFormat(epi_or_a.dtype, false, s16));
  const uint32_t act_kind = p.act       ? uint32_t(p.act->kind)
                            : p.act_fwd ? uint32_t(p.act_fwd->kind)
                                        : 0u;
  const uint32_t act_fwd = !p.act_fwd ? 0u : p.act_fwd->pre ? 2u : 1u;
  // 16-byte fetches where C's vec4 columns start on 4 elements of the operand too.
  const bool epi_vec4 = epi_view && n % 4 == 0 && epi.skip % 4 == 0;
  if (epi_vec4) epi.arg.texel = texelFormat(epi_view->dtype, true, s16);
  const vk::Kernel& kernel = floatKernel(context, "matmul/texel",
                                         {{"SG", sg},
                                          {"TM", texelRows(m)},
                                          {"A_VEC4", a_vec4},
                                          {"B_VEC4", b_vec4},
                                          {"B_KVEC4", b_kvec4},
                                          {"A_MVEC4", a_mvec4},
                                          {"ACCUMULATE", p.beta != 0.0f},
                                          {"C_VEC4", c_vec4},
                                          {"COLSUM", p.colsum != nullptr},
                                          {"KIND", act_kind},
                                          {"ACT_GRAD", p.act != nullptr},
                                          {"EPI_VEC4", epi_vec4},
                                          {"RESIDUAL", p.residual != nullptr},
                                          {"ACT_FWD", act_fwd}},
                                         {{"A_dtype", p.a.view.dtype},
                                          {"B_dtype", p.b.view.dtype},
                                          {"c_dtype", c.dtype},
                                          {"bias_dtype", bias_view.dtype},
                                          {"colsum_dtype", colsum_view.dtype},
                                          {"Epi_dtype", epi_or_a.dtype},
                                          {"pre_dtype", pre_view.dtype}});
  MatmulPush push = pushFor(p, a_off, b_off, bc.skip, bias.skip);
  push.colsum_off = colsum.skip, push.colsum_beta = p.colsum_beta;
  if (epi_view) push.epi_off = epi.skip;
  if (p.act) push.act_param = p.act->param;
  if (p.act_fwd) push.act_param = p.act_fwd->param, push.pre_off = pre.skip;
  const vk::Arg args[] = {ba.arg, bb.arg, bc.arg, bias.arg, colsum.arg, epi.arg, pre.arg};
  rec.dispatchGroups(kernel, args, &push, sizeof(push), vk::divUp(n, kTexelLaneColumns * sg),
                     vk::divUp(m, texelRows(m)), uint32_t(p.batch));
}

// The Coopmat kernel (tensor cores, or its emulated build), or under Auto Vector's split-K
// for a product too small to fill the GPU. args: a, b, c and the bias (or its stand-in),
// bound as for Vector.
void recordCoopmat(vk::Recorder& rec, const Product& p, const Choice& choice,
                   const MatmulPush& push, const vk::Arg (&args)[4], const TensorView& bias) {
  vk::Context& context = rec.context();
  const vk::DeviceInfo& info = context.info();
  const bool emulated = choice.variant == MatmulVariant::CoopmatEmulated;
  const uint32_t m = uint32_t(p.a.rows), n = uint32_t(p.b.cols);
  // Auto's Coopmat hands a product too small to fill the GPU to Vector's split-K.
  if (choice.automatic && !isHalf(p.a.view) && !isHalf(p.b.view)) {
    const Choice vector{MatmulVariant::Vector, {}, 0, true};
    if (recordSplit(rec, p, vector)) return;
  }
  MatmulTiling t = choice.tiling;
  if (t.empty()) {
    // The measured default, or the small tile on a device with less shared memory or
    // fewer invocations per workgroup than the H200 it was measured on.
    t = matmulCoopmatTilingFor(context, m, n, p.batch);
    if (!coopmatTilingFits(info, t, emulated)) t = {2, 2, 32, 2, 2};
    checkCoopmatTiling(context, t, emulated);
  }
  // Each operand's contiguous axis (coopmat.comp): k for a plain A, m for a transposed
  // one (read in 4x4 blocks and transposed); n for a plain B, k for a transposed one. Four
  // elements per read where that axis's length is a multiple of 4 and every row and batch
  // starts on 4 elements of the binding.
  const bool a_kcontig = p.a.s_col == 1, b_ncontig = p.b.s_col == 1;
  const auto quads = [](const Operand& x, bool along_cols, uint32_t off) {
    const int64_t step = along_cols ? x.s_col : x.s_row;
    const int64_t length = along_cols ? x.cols : x.rows;
    const int64_t other = along_cols ? x.s_row : x.s_col;
    return step == 1 && length % 4 == 0 && other % 4 == 0 && x.s_batch % 4 == 0 && off % 4 == 0;
  };
  const bool a_vec = quads(p.a, a_kcontig, push.a_off);
  const bool b_vec = quads(p.b, b_ncontig, push.b_off);
  const uint32_t sg = coopmatLanes(info, emulated), threads = t.wx * t.wy * sg;
  const vk::Kernel& kernel =
      floatKernel(context, emulated ? "matmul/coopmat.emu" : "matmul/coopmat",
                  {{"THREADS", threads},
                   {"SG", sg},
                   {"WM", t.wy},
                   {"WN", t.wx},
                   {"FM", t.tm},
                   {"FN", t.tn},
                   {"BK", t.bk},
                   {"A_KCONTIG", a_kcontig},
                   {"B_NCONTIG", b_ncontig},
                   {"A_VEC", a_vec},
                   {"B_VEC", b_vec},
                   {"A_HALF", isHalf(p.a.view)},
                   {"B_HALF", isHalf(p.b.view)}},
                  {{"c_dtype", p.c.dtype}, {"bias_dtype", bias.dtype}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push), vk::divUp(n, t.wx * t.tn * 16),
                     vk::divUp(m, t.wy * t.tm * 16), uint32_t(p.batch));
}

// The storage-buffer kernels (naive, tiled, vector) bind a, b, c, the bias and the residual:
// one more than a device at Vulkan's minimum of 4 per stage allows. There they take their
// ".sb4" builds, which have no residual binding, and the residual is added in a pass after
// (the same bits for an f32 C: the kernel's epilogue adds it last, in f32, too).
bool fourBindings(const vk::Context& context) {
  return context.info().max_storage_buffers < 5;
}

// A storage-buffer kernel (naive, tiled, vector) for p: its constants, the residual's, and
// every tensor's format (the stand-ins' for a bias or residual not given).
const vk::Kernel& storageKernel(vk::Context& context, const char* name, vk::SpecConstants constants,
                                const Product& p, const TensorView& bias,
                                const TensorView& residual) {
  if (fourBindings(context))
    return floatKernel(context, std::string(name) + ".sb4", std::move(constants),
                       {{"a_dtype", p.a.view.dtype},
                        {"b_dtype", p.b.view.dtype},
                        {"c_dtype", p.c.dtype},
                        {"bias_dtype", bias.dtype}});
  constants.push_back({"RESIDUAL", p.residual != nullptr});
  return floatKernel(context, name, std::move(constants),
                     {{"a_dtype", p.a.view.dtype},
                      {"b_dtype", p.b.view.dtype},
                      {"c_dtype", p.c.dtype},
                      {"bias_dtype", bias.dtype},
                      {"residual_dtype", residual.dtype}});
}

// Whether the product's kernel is a .s16 build: some tensor it binds is f16 or bf16.
bool sixteenBit(const Product& p, const TensorView& bias, const TensorView& residual) {
  for (const TensorView* t : {&p.a.view, &p.b.view, &p.c, &bias, &residual})
    if (t->dtype != DType::F32) return true;
  return false;
}

// The Vector kernel over one product (no split-K): the tile given or the device's choice.
// args: a, b, c, the bias and the residual (or their stand-ins, bias and residual).
void recordVector(vk::Recorder& rec, const Product& p, const Choice& choice, const MatmulPush& push,
                  std::span<const vk::Arg> args, const TensorView& bias,
                  const TensorView& residual) {
  vk::Context& context = rec.context();
  const uint32_t m = uint32_t(p.a.rows), n = uint32_t(p.b.cols);
  const MatmulTiling t =
      choice.tiling.empty() ? matmulTilingFor(context, m, n, p.batch, sixteenBit(p, bias, residual))
                            : choice.tiling;
  // Four-element loads along k (A) or n (B) where that axis is contiguous, its length a
  // multiple of 4 and every row (and batch) starts on 4 elements of the binding (16 bytes of
  // f32, 8 of a 16-bit format).
  MatmulPush vpush = push;
  vpush.k_chunk = choice.k_chunk;
  const bool a_vec = p.a.s_col == 1 && p.a.cols % 4 == 0 && p.a.s_row % 4 == 0 &&
                     p.a.s_batch % 4 == 0 && push.a_off % 4 == 0;
  const bool b_vec = p.b.s_col == 1 && n % 4 == 0 && p.b.s_row % 4 == 0 && p.b.s_batch % 4 == 0 &&
                     push.b_off % 4 == 0;
  const vk::Kernel& kernel = storageKernel(context, "matmul/vector",
                                           {{"WX", t.wx},
                                            {"WY", t.wy},
                                            {"BK", t.bk},
                                            {"TM", t.tm},
                                            {"TN", t.tn},
                                            {"A_VEC", a_vec},
                                            {"B_VEC", b_vec}},
                                           p, bias, residual);
  rec.dispatchGroups(kernel, args, &vpush, sizeof(vpush), vk::divUp(n, t.wx * t.tn),
                     vk::divUp(m, t.wy * t.tm), uint32_t(p.batch));
}

// Without a bias (or residual) the kernels' binding still needs a buffer: 4 bytes of b, which
// it reads anyway and the kernels never index (has_bias = 0, RESIDUAL false); of C where b is
// 16-bit (its last element may be the last 2 bytes of its buffer), in C's format.
TensorView standIn(const Product& p) {
  return p.b.view.dtype == DType::F32 ? view(*p.b.view.buffer, {1}, p.b.view.offset)
                                      : view(*p.c.buffer, {1}, p.c.offset, p.c.dtype);
}

// Records one product with the chosen kernel.
// Where p is deeper than one dispatch of its variant may loop over on this device
// (cpuDepthLimit), records it as products over consecutive slices of K, the first with p's
// bias, beta and residual, each later one adding to C (beta 1), and says so; false (nothing
// recorded) otherwise, and for a split-K slice (its depth is its k_chunk: the product was
// sliced first). f32 C only: a 16-bit C would round once per slice.
bool recordDepthSlices(vk::Recorder& rec, const Product& p, const Choice& choice) {
  const int64_t k = p.a.cols, limit = cpuDepthLimit(rec.context().info(), choice.variant);
  if (choice.k_chunk != 0 || limit == 0 || k <= limit) return false;
  if (p.colsum || p.act || p.act_fwd)
    throw std::logic_error("matmul: a fused epilogue over slices of K");
  if (p.c.dtype != DType::F32)
    throw ShapeError(
        "matmul: K = " + std::to_string(k) + " is deeper than one invocation of the " +
        matmulVariantName(choice.variant) + " kernel may loop over on " +
        rec.context().info().name + " (" + std::to_string(limit) +
        ", a CPU device's loop budget); slices of K add up in an f32 C only, and C is " +
        dtypeName(p.c.dtype));
  for (int64_t k0 = 0; k0 < k; k0 += limit) {
    Product slice = p;
    slice.a.cols = slice.b.rows = std::min(limit, k - k0);
    slice.a.start += uint64_t(k0 * p.a.s_col);
    slice.b.start += uint64_t(k0 * p.b.s_row);
    if (k0 > 0) slice.bias = nullptr, slice.residual = nullptr, slice.beta = 1.0f;
    record(rec, slice, choice);
  }
  return true;
}

void record(vk::Recorder& rec, Product p, const Choice& choice) {
  const MatmulVariant variant = choice.variant;
  p = withBatchAsRows(p);
  vk::Context& context = rec.context();
  const vk::DeviceInfo& info = context.info();
  if (recordDepthSlices(rec, p, choice)) return;
  const uint32_t m = uint32_t(p.a.rows), n = uint32_t(p.b.cols);
  const TensorView c = p.c;
  const TensorView stand_in = standIn(p);
  const TensorView& bias_view = p.bias ? *p.bias : stand_in;
  const Bound bias = bindStorage(context, bias_view);

  if (variant == MatmulVariant::Texel) {
    recordTexel(rec, p, bias_view, bias);
    return;
  }

  const Bound ba = bindStorage(context, p.a.view), bb = bindStorage(context, p.b.view),
              bc = bindStorage(context, c);
  // The naive, tiled and vector kernels add the residual in their epilogue, after the bias.
  const TensorView& residual_view = p.residual ? *p.residual : stand_in;
  const Bound residual = bindStorage(context, residual_view);
  MatmulPush push =
      pushFor(p, ba.skip + uint32_t(p.a.start), bb.skip + uint32_t(p.b.start), bc.skip, bias.skip);
  push.epi_off = residual.skip;
  const vk::Arg all_args[] = {ba.arg, bb.arg, bc.arg, bias.arg, residual.arg};
  const bool four = fourBindings(context);
  const std::span<const vk::Arg> args(all_args, four ? 4 : 5);
  switch (variant) {
    case MatmulVariant::Naive: {
      // 16x16 invocations, or 16x8 where a workgroup may have fewer than 256 (the minimum is 128).
      const uint32_t rows = info.max_workgroup_invocations >= 256 ? 16 : 8;
      const vk::Kernel& kernel =
          storageKernel(context, "matmul/naive", {{"local_size_x", 16u}, {"local_size_y", rows}}, p,
                        bias_view, residual_view);
      rec.dispatch(kernel, args, &push, sizeof(push), n, m, uint64_t(p.batch));
      if (four && p.residual) add(rec, c, *p.residual, c);  // the .sb4 build's residual
      break;
    }
    case MatmulVariant::Tiled: {
      // 64x64 tiles of C, BK = 16: 16x16 invocations with 4x4 outputs each, or 8x8 with 8x8
      // where the device allows fewer than 256 invocations per workgroup (the minimum is 128).
      const uint32_t threads = info.max_workgroup_invocations >= 256 ? 16 : 8;
      const uint32_t per_thread = 64 / threads;
      const vk::Kernel& kernel = storageKernel(
          context, "matmul/tiled",
          {{"WX", threads}, {"WY", threads}, {"BK", 16u}, {"TM", per_thread}, {"TN", per_thread}},
          p, bias_view, residual_view);
      rec.dispatchGroups(kernel, args, &push, sizeof(push), vk::divUp(n, 64), vk::divUp(m, 64),
                         uint32_t(p.batch));
      if (four && p.residual) add(rec, c, *p.residual, c);  // the .sb4 build's residual
      break;
    }
    case MatmulVariant::Vector: {
      if (recordSplit(rec, p, choice)) {
        // c + r after the sum of the partials, f32 (the barrier comes from the recorder).
        if (p.residual) add(rec, c, *p.residual, c);
        break;
      }
      recordVector(rec, p, choice, push, args, bias_view, residual_view);
      if (four && p.residual) add(rec, c, *p.residual, c);  // the .sb4 build's residual
      break;
    }
    case MatmulVariant::Coopmat:
    case MatmulVariant::CoopmatEmulated: {
      const vk::Arg coopmat_args[] = {ba.arg, bb.arg, bc.arg, bias.arg};
      recordCoopmat(rec, p, choice, push, coopmat_args, bias_view);
      // c + r, the order of the Texel kernel's epilogue; f32 (the barrier comes from the
      // recorder).
      if (p.residual) add(rec, c, *p.residual, c);
      break;
    }
    case MatmulVariant::Texel:
    case MatmulVariant::Auto:
      break;  // handled above
  }
}

// out = alpha·X·Y over a batch of `batch`, where out has `out_batch` entries (batch or 1) and
// is stored transposed if out_transposed. A gradient of a broadcast operand sums over the
// batch: as one product with the batch folded into the inner dimension where both operands
// have their batches back to back along it, else one accumulating product per batch entry.
// The epilogue asks for more where the product is one Texel product with out not transposed
// (Fused says what was done; the caller records the rest): colsum, Y's column sums over all of
// the inner dimension and the batch (the bias gradient, when Y is dC), under colsum_w, with
// Y the B operand of one batch entry; act, out = f'(x) ⊙ the product (ActGrad),
// when out is overwritten.
struct Epilogue {
  const TensorView* colsum = nullptr;
  Write colsum_w = Write::Overwrite;
  const ActGrad* act = nullptr;
};
struct Fused {
  bool colsum = false, act = false;
};
Fused gradient(vk::Recorder& rec, Operand x, Operand y, const TensorView& out, bool out_transposed,
               int64_t out_batch, int64_t batch, float alpha, Write w, const Choice& variant,
               const TensorView* scratch, const Epilogue& e = {}) {
  // Column sums and activations are fused only into a product of one dispatch (the depth the
  // product runs at: the batch folded into it where out sums over the batch).
  const int64_t depth = out_batch == batch ? x.cols : batch * x.cols;
  const bool texel = !out_transposed && variant.variant == MatmulVariant::Texel &&
                     !slicesDepth(rec.context(), variant.variant, depth);
  const TensorView* colsum = texel ? e.colsum : nullptr;
  const ActGrad* act = texel && w == Write::Overwrite ? e.act : nullptr;
  const float colsum_beta = e.colsum_w == Write::Accumulate ? 1.0f : 0.0f;
  if (out_transposed) {
    // outᵀ = Yᵀ·Xᵀ: the kernels write C row-major only.
    std::swap(x, y);
    x = transposed(x);
    y = transposed(y);
  }
  const float beta = w == Write::Accumulate ? 1.0f : 0.0f;
  if (out_batch == batch) {
    if (batch != 1) colsum = nullptr;
    record(rec, {x, y, out, batch, nullptr, alpha, beta, scratch, colsum, colsum_beta, act},
           variant);
    return {colsum != nullptr, act != nullptr};
  }
  const int64_t inner = x.cols;
  if (x.s_batch == inner * x.s_col && y.s_batch == inner * y.s_row) {
    x.cols = y.rows = batch * inner;
    x.s_batch = y.s_batch = 0;
    record(rec, {x, y, out, 1, nullptr, alpha, beta, scratch, colsum, colsum_beta, act}, variant);
    return {colsum != nullptr, act != nullptr};
  }
  for (int64_t z = 0; z < batch; ++z) {
    Operand xz = x, yz = y;
    xz.start += uint64_t(z * x.s_batch);
    yz.start += uint64_t(z * y.s_batch);
    const float beta_z = z == 0 ? beta : 1.0f;
    record(rec, {xz, yz, out, 1, nullptr, alpha, beta_z, scratch}, variant);
  }
  return {};
}

}  // namespace

Shape matmulShape(const Shape& a, const Shape& b, bool trans_a, bool trans_b, const Shape* bias) {
  const std::string shapes = "matmul: " + describe(a, trans_a) + " x " + describe(b, trans_b);
  auto fail = [&](const std::string& why) { throw ShapeError(shapes + ": " + why); };
  if (a.rank() < 2 || a.rank() > 3 || b.rank() < 2 || b.rank() > 3)
    fail("operands must be 2-D or 3-D");
  if (a.numel() == 0 || b.numel() == 0) fail("empty operand");
  const int ra = a.rank(), rb = b.rank();
  const int64_t m = trans_a ? a[ra - 1] : a[ra - 2], k = trans_a ? a[ra - 2] : a[ra - 1];
  const int64_t k2 = trans_b ? b[rb - 1] : b[rb - 2], n = trans_b ? b[rb - 2] : b[rb - 1];
  if (k != k2) fail("inner dims differ (" + std::to_string(k) + " vs " + std::to_string(k2) + ")");
  const int64_t ba = ra == 3 ? a[0] : 1, bb = rb == 3 ? b[0] : 1;
  const int64_t batch = std::max(ba, bb);
  if ((ba != 1 && ba != batch) || (bb != 1 && bb != batch))
    fail("batch dims differ (each must be the batch or 1)");
  if (bias && (bias->numel() != n || bias->back() != n))
    fail("bias " + bias->str() + " must be (" + std::to_string(n) + ")");
  return ra == 3 || rb == 3 ? Shape{batch, m, n} : Shape{m, n};
}

const char* matmulVariantName(MatmulVariant variant) {
  switch (variant) {
    case MatmulVariant::Auto:
      return "auto";
    case MatmulVariant::Naive:
      return "naive";
    case MatmulVariant::Tiled:
      return "tiled";
    case MatmulVariant::Texel:
      return "texel";
    case MatmulVariant::Vector:
      return "vector";
    case MatmulVariant::Coopmat:
      return "coopmat";
    case MatmulVariant::CoopmatEmulated:
      return "coopmat-emulated";
  }
  return "?";
}

std::string matmulTilingText(const MatmulTiling& t) {
  return std::to_string(t.wx) + "x" + std::to_string(t.wy) + "x" + std::to_string(t.bk) + "x" +
         std::to_string(t.tm) + "x" + std::to_string(t.tn);
}

MatmulTiling matmulTilingFor(const vk::Context& context, int64_t m, int64_t n, int64_t batch,
                             bool sixteen) {
  const vk::DeviceInfo& info = context.info();
  const auto groups = [&](int64_t rows, int64_t cols) {
    return ((m + rows - 1) / rows) * ((n + cols - 1) / cols) * batch;
  };
  // Measured on an H100 (BENCHMARKS.md, matmul on the GPU): 64x128 tiles of 4x8 per
  // invocation reach 36.6 TFLOP/s at 4096³ (8x8 per invocation spills and runs at 2); the
  // GPT's 768-row products run fastest with 32x64 tiles, which give them enough workgroups.
  // A device without 256 invocations per workgroup (the minimum is 128) takes 32x64.
  // With a 16-bit tensor the .s16 build's 4x8 tile spills on the H100: 2.0 TFLOP/s against
  // 31.1 for 4x4 (bf16, 8192x3072x768; f32's 4x8 36.2), so 16-bit products take 4x4.
  if (info.max_workgroup_invocations >= 256) {
    if (!sixteen && groups(64, 128) >= kWorkgroupsToFill) return {16, 16, 16, 4, 8};
    if (groups(64, 64) >= kWorkgroupsToFill) return {16, 16, 16, 4, 4};
  }
  return {16, 8, 16, 4, 4};
}

MatmulTiling matmulCoopmatTilingFor(const vk::Context& context, int64_t m, int64_t n,
                                    int64_t batch) {
  (void)context;
  const int64_t groups = ((m + 127) / 128) * ((n + 127) / 128) * batch;
  // Measured on an H200 at 4096³ (BENCHMARKS.md): 128x128 tiles of 2x2 subgroups, each 4x4
  // fragments of 16x16, ran fastest (140 TFLOP/s against 109 for 2x4 subgroups of 4x2); where
  // they leave the GPU half idle, 64x64 tiles of 2x2 subgroups of 2x2 fragments.
  if (groups >= kWorkgroupsToFill / 2) return {2, 2, 32, 4, 4};
  return {2, 2, 32, 2, 2};
}

int64_t matmulSplitK(int64_t m, int64_t n, int64_t k, int64_t batch) {
  return splitFor(m, n, k, batch).parts;
}

int64_t matmulScratch(int64_t m, int64_t n, int64_t k, int64_t batch) {
  const int64_t parts = matmulSplitK(m, n, k, batch);
  return parts > 1 ? parts * m * n : 0;
}

int64_t matmulBackwardScratch(const Shape& a, const Shape& b, bool trans_a, bool trans_b,
                              bool for_a) {
  const Shape c = matmulShape(a, b, trans_a, trans_b);
  const int r = c.rank();
  const int64_t m = c[r - 2], n = c[r - 1], batch = r == 3 ? c[0] : 1;
  const int64_t k = trans_a ? a[a.rank() - 2] : a[a.rank() - 1];
  // The gradient is (M,K) over N for a, (K,N) over M for b, written transposed where its
  // operand is stored so (gradient() swaps the product's sides); a broadcast operand's sums
  // over the batch as one product with the batch folded into the inner dimension, or one per
  // batch entry. The most any of those may need.
  const Shape& x = for_a ? a : b;
  const int64_t rows = for_a ? m : k, cols = for_a ? k : n, inner = for_a ? n : m;
  const int64_t out_batch = x.rank() == 3 ? x[0] : 1;
  int64_t most = 0;
  for (const int64_t depth : {inner, inner * batch}) {
    const int64_t entries = out_batch == batch ? batch : 1;
    if (depth != inner && out_batch == batch) continue;
    most = std::max({most, matmulScratch(rows, cols, depth, entries),
                     matmulScratch(cols, rows, depth, entries)});
  }
  return most;
}

MatmulVariant matmulVariantFor(const vk::Context& context) {
  const vk::DeviceInfo& info = context.info();
  // On a CPU, shared memory and barriers are slow and texel fetches are cheap gathers
  // (docs/DESIGN.md, measured facts). On a GPU (an H100, BENCHMARKS.md) Vector is 1.1-1.5x
  // faster than Tiled at the GPT's shapes and level with Texel at 4096³; Coopmat rounds the
  // inputs to fp16, so only where the Context allows it.
  if (info.isCpu() && canShuffle(info)) return MatmulVariant::Texel;
  if (info.coopmat && context.fp16Matmul()) return MatmulVariant::Coopmat;
  return MatmulVariant::Vector;
}

void matmul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& c,
            const MatmulOptions& options) {
  vk::Context& context = rec.context();
  if (options.bias)
    matmulShape(a.shape, b.shape, options.trans_a, options.trans_b, &options.bias->shape);
  const Dims d = checkShapes(context, a, b, c, options, "c");
  if (options.bias) {
    const TensorView& bias = *options.bias;
    checkFloatOperand("matmul", "bias", bias);
    checkAlias("matmul", "c", c, "bias", bias, false);
  }
  checkAlias("matmul", "c", c, "a", a, false);
  checkAlias("matmul", "c", c, "b", b, false);
  // An operand laid out as C, apart from it: the residual (read) or act_pre (written).
  auto checkLikeC = [&](const char* said, const char* name, const TensorView& t) {
    if (!(t.shape == c.shape))
      throw ShapeError(std::string("matmul: ") + said + " " + t.shape.str() +
                       " must be shaped like c " + c.shape.str());
    checkFloatOperand("matmul", name, t);
    checkAlias("matmul", "c", c, name, t, false);
  };
  if (options.residual) checkLikeC("the residual", "residual", *options.residual);
  if (options.act_pre && !options.act) throw ShapeError("matmul: act_pre without an activation");
  if (options.act && (options.beta != 0.0f || options.residual))
    throw ShapeError(std::string("matmul: an applied activation (") + activationName(*options.act) +
                     ") needs beta 0 and no residual");
  if (options.act_pre) {
    const TensorView& pre = *options.act_pre;
    checkLikeC("act_pre", "act_pre", pre);
    for (const auto& [name, t] : {std::pair{"a", &a}, std::pair{"b", &b}})
      checkAlias("matmul", "act_pre", pre, name, *t, false);
    if (options.bias) checkAlias("matmul", "act_pre", pre, "bias", *options.bias, false);
  }
  checkScratch("matmul", options.scratch,
               {{"a", &a},
                {"b", &b},
                {"c", &c},
                {"bias", options.bias},
                {"residual", options.residual},
                {"act_pre", options.act_pre}});
  // The Texel kernel reads the residual through a texel view too.
  const Choice variant =
      choose(context, options, {&a, &b, options.residual ? options.residual : &a},
             formatsOf({&a, &b}, {&c, options.bias, options.residual, options.act_pre}));
  Product p{operand(a, options.trans_a), operand(b, options.trans_b), c, d.batch};
  p.bias = options.bias, p.alpha = options.alpha, p.beta = options.beta;
  p.scratch = options.scratch;
  p.residual = options.residual;
  if (!options.act) {
    record(rec, p, variant);
    return;
  }
  const ActForward act{*options.act, options.act_param, options.act_pre};
  if (variant.variant == MatmulVariant::Texel && !slicesDepth(context, variant.variant, d.k)) {
    p.act_fwd = &act;
    record(rec, p, variant);
    return;
  }
  // The product into pre (or c), then the activation pass (in place without pre).
  if (options.act_pre) p.c = *options.act_pre;
  record(rec, p, variant);
  activation(rec, act.kind, p.c, c, act.param);
}

void matmul(vk::Recorder& rec, const TensorView& a, const TensorView& b, const TensorView& c,
            MatmulVariant variant) {
  MatmulOptions options;
  options.variant = variant;
  matmul(rec, a, b, c, options);
}

void matmulBackward(vk::Recorder& rec, const TensorView& a, const TensorView& b,
                    const TensorView& dc, const MatmulGrads& grads, const MatmulOptions& forward,
                    Write w) {
  vk::Context& context = rec.context();
  const Dims d = checkShapes(context, a, b, dc, forward, "dc");
  checkGradient("da", grads.da, grads.da && grads.da->shape == a.shape, a.shape.str(), a, b, dc);
  checkGradient("db", grads.db, grads.db && grads.db->shape == b.shape, b.shape.str(), a, b, dc);
  checkGradient(
      "dbias", grads.dbias,
      grads.dbias && grads.dbias->shape.numel() == d.n && grads.dbias->shape.back() == d.n,
      "(" + std::to_string(d.n) + ")", a, b, dc);
  if (grads.da && grads.db) checkAlias("matmul backward", "da", *grads.da, "db", *grads.db, false);
  if (grads.da_act_x) {
    const std::string what = "matmul backward: the activation gradient of da";
    if (!grads.da) throw ShapeError(what + " needs da");
    if (!(grads.da_act_x->shape == a.shape))
      throw ShapeError(what + ": x " + grads.da_act_x->shape.str() + " must be shaped like a " +
                       a.shape.str());
    if (forward.trans_a || w != Write::Overwrite || !activationBackwardReadsX(grads.da_act))
      throw ShapeError(what + " needs a not transposed, da overwritten and a kind that reads x (" +
                       activationName(grads.da_act) + ")");
    checkFloatOperand("matmul backward", "x", *grads.da_act_x);
    checkAlias("matmul backward", "da", *grads.da, "x", *grads.da_act_x, false);
  }
  for (const TensorView* g : {grads.da, grads.db})
    if (g && grads.dbias)
      checkAlias("matmul backward", "dbias", *grads.dbias, "a gradient", *g, false);
  checkScratch("matmul backward", forward.scratch,
               {{"a", &a},
                {"b", &b},
                {"dc", &dc},
                {"da", grads.da},
                {"db", grads.db},
                {"dbias", grads.dbias}});
  const Choice variant =
      choose(context, forward, {&a, &b, &dc},
             formatsOf({&a, &b, &dc}, {grads.da, grads.db, grads.dbias, grads.da_act_x}));

  const Operand oa = operand(a, forward.trans_a), ob = operand(b, forward.trans_b);
  const Operand odc{dc, 0, d.m, d.n, d.n, 1, d.batch > 1 ? d.m * d.n : 0};
  const auto batchOf = [](const TensorView& t) { return t.shape.rank() == 3 ? t.shape[0] : 1; };
  // dÂ = alpha·dC·B̂ᵀ (M,K); A stored transposed holds dÂᵀ. An activation gradient goes on
  // its way out (Texel) or is a pass over it after.
  if (grads.da) {
    const ActGrad act{grads.da_act_x, grads.da_act, grads.da_act_param};
    const Fused fused = gradient(rec, odc, transposed(ob), *grads.da, forward.trans_a, batchOf(a),
                                 d.batch, forward.alpha, w, variant, forward.scratch,
                                 {.act = grads.da_act_x ? &act : nullptr});
    if (grads.da_act_x && !fused.act)
      activationBackward(rec, grads.da_act, *grads.da_act_x, {}, *grads.da, *grads.da,
                         grads.da_act_param);
  }
  // dB̂ = alpha·Âᵀ·dC (K,N); B stored transposed holds dB̂ᵀ. dbias = Σ rows of dC, the
  // column sums of that product's B operand: the Texel kernel adds them up on the way.
  const Write bias_w = grads.dbias_write.value_or(w);
  bool dbias_done = false;
  if (grads.db)
    dbias_done = gradient(rec, transposed(oa), odc, *grads.db, forward.trans_b, batchOf(b), d.batch,
                          forward.alpha, w, variant, forward.scratch,
                          {.colsum = grads.dbias, .colsum_w = bias_w})
                     .colsum;
  if (grads.dbias && !dbias_done) sumRows(rec, dc, *grads.dbias, bias_w);
}

}  // namespace vkgrad::ops
