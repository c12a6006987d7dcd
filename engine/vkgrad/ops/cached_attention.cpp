#include "vkgrad/ops/cached_attention.h"

#include <bit>
#include <cmath>
#include <initializer_list>
#include <string>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// Mirrors shaders/cached_attention/cache_write.comp and forward.comp.
struct WritePush {
  uint32_t b, r, rows, hd;
  uint32_t k_stride, v_stride;
  uint32_t skip[5];
};
struct CachedPush {
  uint32_t b, h, r, rows;
  float scale;
  uint32_t q_stride, o_stride;
  uint32_t skip[5];
  uint32_t hkv;  // the caches' heads (grouped-query attention: fewer than h)
};
static_assert(sizeof(CachedPush) == 52);

constexpr uint32_t kWriteWorkgroup = 64;
// Invocations per (row, head): a power of two, at most the 128 every device allows.
constexpr uint32_t kCachedWorkgroup = 64;
constexpr uint32_t kChunk = 256;  // keys per pass through shared memory
// What both kernels' usual builds bind: four float tensors and the position word.
constexpr uint32_t kStorageBuffers = 5;

int64_t strideOf(const AttentionTensor& t) {
  return t.row_stride ? t.row_stride : t.view.shape[2] * t.view.shape[3];
}

// t as one flat view over every element its rows span, checked against (B, R, H, D) and its
// buffer.
TensorView rows(const char* op, const char* name, const AttentionTensor& t, const Shape& want) {
  const std::string what = std::string(op) + ": " + name + " " + t.view.shape.str();
  if (!(t.view.shape == want)) throw ShapeError(what + " must be " + want.str() + " (B,R,H,D)");
  const int64_t stride = strideOf(t);
  if (stride < want[2] * want[3])
    throw ShapeError(what + ": row stride " + std::to_string(stride) + " is less than H*D");
  const TensorView flat{t.view.buffer, t.view.offset,
                        Shape{(want[0] * want[1] - 1) * stride + want[2] * want[3]}, t.view.dtype};
  checkFloatOperand(op, name, flat);
  return flat;
}

// Binds the four float views in order and then the position word, each one's skip into
// skip[i]. Both kernels bind 5 storage buffers; within 4 (`four`) their ".sb4" builds read the
// position through an R32UI texel view (one texel: it fits every device).
std::vector<vk::Arg> bindAll(const vk::Context& ctx, std::initializer_list<TensorView> views,
                             const TensorView& position, bool four, uint32_t (&skip)[5]) {
  std::vector<vk::Arg> args;
  for (const TensorView& t : views) {
    const Bound bound = bindStorage(ctx, t);
    skip[args.size()] = bound.skip;
    args.push_back(bound.arg);
  }
  const Bound bound =
      four ? bindTexel(ctx, position, vk::TexelFormat::R32u) : bindStorage(ctx, position);
  skip[args.size()] = bound.skip;
  args.push_back(bound.arg);
  return args;
}

struct Dims {
  int64_t b, r, h, d, rows, hkv;
};

// The cache pair against (B, rows, Hkv, D) and the position word: Hkv is the new rows' H, or
// (grouped, for queries) any divisor of it.
Dims checkCache(const char* op, const Shape& new_rows, const TensorView& k_cache,
                const TensorView& v_cache, const TensorView& position, bool grouped) {
  const Shape& c = k_cache.shape;
  const std::string shapes = std::string(op) + ": rows " + new_rows.str() + ", k_cache " + c.str() +
                             ", v_cache " + v_cache.shape.str();
  if (new_rows.rank() != 4 || new_rows.numel() == 0)
    throw ShapeError(shapes + ": the new rows must be a non-empty (B,R,H,D)");
  if (new_rows[3] > kMaxHeadDim)
    throw ShapeError(shapes + ": head dim above the supported " + std::to_string(kMaxHeadDim));
  if (c.rank() != 4 || c[0] != new_rows[0] || c[3] != new_rows[3] || !(v_cache.shape == c))
    throw ShapeError(shapes + ": the caches must both be (B,rows,Hkv,D) with the rows' B and D");
  if (grouped ? (c[2] < 1 || new_rows[2] % c[2] != 0) : c[2] != new_rows[2])
    throw ShapeError(shapes + (grouped ? ": the caches' heads must divide the queries' heads"
                                       : ": the new rows must have the caches' heads"));
  if (c[1] < new_rows[1]) throw ShapeError(shapes + ": more new rows than the cache holds");
  checkFloatOperand(op, "k_cache", k_cache);
  checkFloatOperand(op, "v_cache", v_cache);
  checkFits(op, "position", position, DType::U32);
  if (position.shape.numel() != 1)
    throw ShapeError(std::string(op) + ": position " + position.shape.str() + " must be (1)");
  return {new_rows[0], new_rows[1], new_rows[2], new_rows[3], c[1], c[2]};
}

}  // namespace

void writeKvCache(vk::Recorder& rec, const AttentionTensor& k, const AttentionTensor& v,
                  const TensorView& k_cache, const TensorView& v_cache,
                  const TensorView& position) {
  const char* op = "writeKvCache";
  const Dims d = checkCache(op, k.view.shape, k_cache, v_cache, position, false);
  const TensorView fk = rows(op, "k", k, k.view.shape), fv = rows(op, "v", v, k.view.shape);
  checkAlias(op, "k_cache", k_cache, "v_cache", v_cache, false);
  for (const TensorView* in : {&fk, &fv})
    for (const TensorView* out : {&k_cache, &v_cache})
      checkAlias(op, "a cache", *out, "a new row", *in, false);
  vk::Context& ctx = rec.context();
  WritePush push{uint32_t(d.b),
                 uint32_t(d.r),
                 uint32_t(d.rows),
                 uint32_t(d.h * d.d),
                 uint32_t(strideOf(k)),
                 uint32_t(strideOf(v)),
                 {}};
  const bool four = fewerStorageBuffers(ctx, kStorageBuffers);
  const std::vector<vk::Arg> args =
      bindAll(ctx, {fk, fv, k_cache, v_cache}, position, four, push.skip);
  const vk::Kernel& kernel =
      floatKernel(ctx, four ? "cached_attention/cache_write.sb4" : "cached_attention/cache_write",
                  {{"local_size_x", kWriteWorkgroup}},
                  {{"k_dtype", k.view.dtype},
                   {"v_dtype", v.view.dtype},
                   {"k_cache_dtype", k_cache.dtype},
                   {"v_cache_dtype", v_cache.dtype}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push),
                     gridGroups(ctx, uint64_t(d.b * d.r * d.h * d.d), kWriteWorkgroup));
}

namespace {

// Each invocation of the kernel loops over every key of the cache it may see: per chunk of
// kChunk keys, its keys' dot products (D + 2 each), its output columns' sums over the chunk,
// and the reductions. A CPU device ends an invocation after 65,535 loop iterations and keeps
// what it has (on lavapipe at D = 64: right over 8,192 cache rows, wrong over 32,768), so
// there a cache past three quarters of that is refused by name (22,528 rows at D = 64).
void checkCpuLoops(const vk::Context& ctx, const char* op, int64_t rows, int64_t d) {
  if (!ctx.info().isCpu()) return;
  const int64_t cols = (d + kCachedWorkgroup - 1) / kCachedWorkgroup;
  const int64_t per_chunk = (kChunk / kCachedWorkgroup) * (d + 2) + cols * kChunk +
                            4 * std::bit_width(kCachedWorkgroup) + 8;
  constexpr int64_t kBudget = 65535 * 3 / 4;
  const int64_t most = kBudget / per_chunk * kChunk;
  if (rows > most)
    throw Error(std::string(op) + ": a cache of " + std::to_string(rows) + " rows at D = " +
                std::to_string(d) + " is more than one invocation may loop over on " +
                ctx.info().name + " (" + std::to_string(most) +
                " rows: a CPU device ends an invocation after 65,535 loop iterations); decode "
                "with a shorter window (vkgrad-gpt sample --context N)");
}

}  // namespace

void cachedAttention(vk::Recorder& rec, const AttentionTensor& q, const TensorView& k_cache,
                     const TensorView& v_cache, const TensorView& position,
                     const AttentionTensor& o, float scale) {
  const char* op = "cachedAttention";
  const Dims d = checkCache(op, q.view.shape, k_cache, v_cache, position, true);
  const TensorView fq = rows(op, "q", q, q.view.shape), fo = rows(op, "o", o, q.view.shape);
  for (const TensorView* in : {&fq, &k_cache, &v_cache})
    checkAlias(op, "o", fo, "an input", *in, false);
  if (!(scale >= 0.0f)) throw Error(std::string(op) + ": scale must be >= 0 (0: 1/sqrt(D))");
  vk::Context& ctx = rec.context();
  checkCpuLoops(ctx, op, d.rows, d.d);
  CachedPush push{uint32_t(d.b),
                  uint32_t(d.h),
                  uint32_t(d.r),
                  uint32_t(d.rows),
                  scale != 0.0f ? scale : float(1.0 / std::sqrt(double(d.d))),
                  uint32_t(strideOf(q)),
                  uint32_t(strideOf(o)),
                  {},
                  uint32_t(d.hkv)};
  const bool four = fewerStorageBuffers(ctx, kStorageBuffers);
  const std::vector<vk::Arg> args =
      bindAll(ctx, {fq, k_cache, v_cache, fo}, position, four, push.skip);
  const vk::Kernel& kernel =
      floatKernel(ctx, four ? "cached_attention/forward.sb4" : "cached_attention/forward",
                  {{"D", uint32_t(d.d)}, {"W", kCachedWorkgroup}, {"CHUNK", kChunk}},
                  {{"q_dtype", q.view.dtype},
                   {"k_cache_dtype", k_cache.dtype},
                   {"v_cache_dtype", v_cache.dtype},
                   {"o_dtype", o.view.dtype}});
  rec.dispatchGroups(kernel, args, &push, sizeof(push), uint32_t(d.r), uint32_t(d.h),
                     uint32_t(d.b));
}

}  // namespace vkgrad::ops
