#include "vkgrad/ops/gather.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/ops/storage.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// Every gather kernel's push constants; skip[i]: where binding i's view starts, in elements.
struct GatherPush {
  uint32_t n, vocab, dim;
  uint32_t skip[4];
};
static_assert(sizeof(GatherPush) == 28);

// The forward's: the table's row stride as well (rows may overlap).
struct ForwardPush {
  uint32_t n, vocab, dim, row_stride;
  uint32_t skip[4];
};
static_assert(sizeof(ForwardPush) == 32);

// n, V, D after checking everything the kernels rely on. dense: the (n,D) tensor beside
// ids (out or dout), named for the message.
// table_stride: elements between table rows (the forward may overlap them; 0: D).
// table_may_be_u32: the forward gathers u32 rows too; the backward's dtable is a float.
GatherPush checkShapes(const char* op, const TensorView& ids, const TensorView& table,
                       const char* table_name, const TensorView& dense, const char* dense_name,
                       const TensorView& status, bool table_may_be_u32, int64_t table_stride = 0) {
  const std::string shapes = std::string(op) + ": ids " + ids.shape.str() + ", " + table_name +
                             " " + table.shape.str() + ", " + dense_name + " " + dense.shape.str();
  if (table.shape.rank() != 2 || table.shape.numel() == 0)
    throw ShapeError(shapes + ": " + table_name + " must be a non-empty (V,D)");
  gatherShape(table.shape, ids.shape, ids.dtype, op);
  const int64_t n = ids.shape.numel(), vocab = table.shape[0], dim = table.shape[1];
  if (table_stride < 0)
    throw ShapeError(shapes + ": table row stride " + std::to_string(table_stride) +
                     " must not be negative");
  const int64_t stride = table_stride > 0 ? table_stride : dim;
  // Elements the table spans: dense V * D, or up to the last row's end when strided.
  const int64_t extent = (vocab - 1) * stride + dim;
  bool dense_ok = dense.shape.rank() == ids.shape.rank() + 1 && dense.shape.back() == dim;
  for (int i = 0; dense_ok && i < ids.shape.rank(); ++i) dense_ok = dense.shape[i] == ids.shape[i];
  if (!dense_ok)
    throw ShapeError(shapes + ": " + dense_name +
                     " must have the shape of ids plus D = " + std::to_string(dim));
  // The kernels index with 32 bits, and the counting sort uses 0xFFFFFFFF as "no id".
  if (n * dim > int64_t(UINT32_MAX) || extent > int64_t(UINT32_MAX) ||
      vocab + n > int64_t(UINT32_MAX))
    throw ShapeError(shapes + ": sizes exceed 32-bit indexing");
  if (status.shape.numel() < 2)
    throw ShapeError(shapes + ": status " + status.shape.str() + " must hold 2 u32 words");
  checkFits(op, "ids", ids, DType::U32);
  const TensorView spanned{table.buffer, table.offset, Shape{extent}, table.dtype};
  if (table.dtype == DType::U32 && table_may_be_u32) {
    // u32 rows are words moved without arithmetic: out holds them as u32 or as f32 bits.
    checkFits(op, table_name, spanned, DType::U32);
    checkFits(op, dense_name, dense, dense.dtype == DType::U32 ? DType::U32 : DType::F32);
  } else {
    checkFloat(op, table_name, spanned);
    checkFloat(op, dense_name, dense);
  }
  checkFits(op, "status", status, DType::U32);
  return {uint32_t(n), uint32_t(vocab), uint32_t(dim), {}};
}

// Binds the views in order at any 4-byte offsets, recording where each starts in push.skip.
std::vector<vk::Arg> bindAll(const vk::Context& context, GatherPush& push,
                             std::initializer_list<TensorView> views) {
  std::vector<vk::Arg> args;
  for (const TensorView& v : views) {
    const Bound bound = bindStorage(context, v);
    push.skip[args.size()] = bound.skip;
    args.push_back(bound.arg);
  }
  return args;
}

// The first n words of t (the status pair, the used part of scratch).
TensorView words(const TensorView& t, int64_t n) {
  return {t.buffer, t.offset, Shape{n}, DType::U32};
}

// The format a kernel reads a table or row tensor in: a u32 one as f32 words.
DType wordsAsF32(DType dtype) {
  return dtype == DType::U32 ? DType::F32 : dtype;
}

// The counting sort runs in one workgroup that ranks each chunk of WG positions with WG
// compares per position, so one subgroup is the best size: its barriers are cheap and the
// ranking work per position is smallest. On lavapipe (subgroup 8) that is ~4x faster than 64.
// On a CPU device wider where the counts' zeroing and scan (3 V / WG steps per invocation)
// and the counting (n / WG) would pass llvmpipe's loop budget (ops/binding.h): a vocabulary
// of 200,003 on 8 lanes looped ~75,000 times, past the 65535 at which llvmpipe silently ends
// an invocation, and left most of the cursors unset.
uint32_t bucketWorkgroup(const vk::Context& context, uint64_t vocab, uint64_t n) {
  uint32_t wg = std::clamp<uint32_t>(context.info().subgroup_size, 8, 64);
  const auto steps = [&](uint64_t w) {
    return 3 * ((vocab + w - 1) / w) + 2 * ((n + w - 1) / w) + w;
  };
  if (context.info().isCpu())
    while (steps(wg) > kCpuLaneSteps && wg * 2 <= workgroupSize(context, 1024)) wg *= 2;
  return wg;
}

}  // namespace

Shape gatherShape(const Shape& table, const Shape& ids, DType ids_dtype, const char* op) {
  const std::string shapes =
      std::string(op) + ": table " + table.str() + ", ids " + ids.str() + ": ";
  if (ids_dtype != DType::U32) throw ShapeError(shapes + "ids must be u32, got f32");
  if (ids.rank() < 1 || ids.numel() == 0) throw ShapeError(shapes + "ids must be non-empty");
  if (table.rank() < 1 || table.numel() == 0) throw ShapeError(shapes + "the table is empty");
  if (ids.rank() + table.rank() - 1 > Shape::kMaxRank)
    throw ShapeError(shapes + "the rows would have more than " + std::to_string(Shape::kMaxRank) +
                     " dims");
  int64_t dims[Shape::kMaxRank] = {};
  int rank = 0;
  for (int i = 0; i < ids.rank(); ++i) dims[rank++] = ids[i];
  for (int i = 1; i < table.rank(); ++i) dims[rank++] = table[i];
  return Shape::of(dims, rank);
}

void checkIds(std::span<const uint32_t> ids, uint32_t vocab) {
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= vocab)
      throw ShapeError("gather: id " + std::to_string(ids[i]) + " at position " +
                       std::to_string(i) + " is out of range for vocab " + std::to_string(vocab));
}

void gather(vk::Recorder& rec, const TensorView& ids, const TensorView& table,
            const TensorView& out, const TensorView& status, int64_t table_row_stride) {
  const GatherPush shapes =
      checkShapes("gather", ids, table, "table", out, "out", status, true, table_row_stride);
  const int64_t stride = table_row_stride > 0 ? table_row_stride : shapes.dim;
  const TensorView spanned{table.buffer, table.offset,
                           Shape{(shapes.vocab - 1) * stride + shapes.dim}, table.dtype};
  ForwardPush push{shapes.n, shapes.vocab, shapes.dim, uint32_t(stride), {}};
  std::vector<vk::Arg> args;
  for (const TensorView& v : {ids, spanned, out, words(status, 2)}) {
    const Bound bound = bindStorage(rec.context(), v);
    push.skip[args.size()] = bound.skip;
    args.push_back(bound.arg);
  }
  // 4 columns per invocation where the table and out hold 32-bit words and every row of both
  // starts on 16 bytes.
  const DType table_dtype = wordsAsF32(table.dtype), out_dtype = wordsAsF32(out.dtype);
  const bool vec4 = table_dtype == DType::F32 && out_dtype == DType::F32 && push.dim % 4 == 0 &&
                    push.row_stride % 4 == 0 && push.skip[1] % 4 == 0 && push.skip[2] % 4 == 0;
  const vk::Kernel& kernel =
      floatKernel(rec.context(), "gather/forward",
                  {{"local_size_x", workgroupSize(rec.context())}, {"kVec4", vec4}},
                  {{"table_dtype", table_dtype}, {"out_rows_dtype", out_dtype}});
  rec.dispatchGroups(
      kernel, args, &push, sizeof(push),
      strideGroups(rec.context(), uint64_t(push.n) * (vec4 ? push.dim / 4 : push.dim)));
}

int64_t gatherBackwardScratch(int64_t vocab, int64_t n) {
  return vocab + n;
}

// Auto on a GPU: Scan for up to this many positions, at least this many outputs (V * D) and
// at most this much work (V * D * n), else Bucket.
constexpr uint32_t kScanMaxPositions = 2048;
constexpr uint64_t kScanMinOutputs = uint64_t(1) << 16;
constexpr uint64_t kScanMaxWork = uint64_t(1) << 30;

// Auto picks Bucket on CPU devices. lavapipe, 2 cores shared with other jobs (load average ~10, so
// absolute times are inflated), n = 4096 positions, D = 64, ms per call (median of 7; Scan of 3):
//   V       Scan    Bucket = sort pass + sum pass
//   65       475     4.5      ~1        ~4.4
//   256     1401    11        ~0.8      ~4
//   1000    6931     9.4      ~1        ~5
//   5000   22442    10.4      ~1        ~8
// Scan pays V*n*D loads (lavapipe scalarises each), Bucket O(n*D + V*D) plus a one-workgroup
// sort of O(n*WG); Bucket wins by 100x at V = 65 and grows with V, so Scan stays only as an
// independent check (tests compare the two bit for bit).
void gatherBackward(vk::Recorder& rec, const TensorView& ids, const TensorView& dout,
                    const TensorView& dtable, const TensorView& scratch, const TensorView& status,
                    Write write, GatherBackwardVariant variant) {
  GatherPush push =
      checkShapes("gatherBackward", ids, dtable, "dtable", dout, "dout", status, false);
  const bool accumulate = write == Write::Accumulate;
  vk::KernelCache& kernels = rec.context().kernels();
  // Auto and Bucket need the scratch, whichever kernel Auto then picks on this device, so
  // that a caller's scratch that works on one device works on every device.
  const int64_t need = gatherBackwardScratch(push.vocab, push.n);
  if (variant != GatherBackwardVariant::Scan) {
    if (scratch.shape.numel() < need)
      throw ShapeError("gatherBackward: scratch " + scratch.shape.str() +
                       " holds fewer than V + n = " + std::to_string(need) + " u32 words");
    checkFits("gatherBackward", "scratch", scratch, DType::U32);
  }
  // On a GPU the one-workgroup sort of Bucket is the slow part of a large table (0.83 ms of a
  // 2.1 ms GCN step on an H200 with V*D = 100,000 x 10 and n = 200 positions; Scan 0.157 ms),
  // while Scan's V*D invocations each loop over n ids that the lanes of a subgroup load
  // together. A small table gives Scan too few invocations to hide that loop (the GPT's,
  // V*D = 86 x 128 over n = 768: Bucket 0.064 ms, Scan 0.078; BENCHMARKS.md).
  if (variant == GatherBackwardVariant::Auto && !rec.context().info().isCpu() &&
      push.n <= kScanMaxPositions && uint64_t(push.vocab) * push.dim >= kScanMinOutputs &&
      uint64_t(push.vocab) * push.dim * push.n <= kScanMaxWork)
    variant = GatherBackwardVariant::Scan;
  if (variant == GatherBackwardVariant::Scan) {
    const vk::Kernel& kernel =
        floatKernel(rec.context(), "gather/backward_scan",
                    {{"local_size_x", workgroupSize(rec.context())}, {"kAccumulate", accumulate}},
                    {{"dout_dtype", dout.dtype}, {"dtable_dtype", dtable.dtype}});
    const auto args = bindAll(rec.context(), push, {ids, dout, dtable, words(status, 2)});
    rec.dispatchGroups(kernel, args, &push, sizeof(push),
                       strideGroups(rec.context(), uint64_t(push.vocab) * push.dim));
    return;
  }
  GatherPush bucket_push = push;
  const auto bucket_args =
      bindAll(rec.context(), bucket_push, {ids, words(scratch, need), words(status, 2)});
  rec.dispatchGroups(
      kernels.get("gather/bucket",
                  {{"local_size_x", bucketWorkgroup(rec.context(), push.vocab, push.n)}}),
      bucket_args, &bucket_push, sizeof(bucket_push), 1);
  const auto sum_args = bindAll(rec.context(), push, {words(scratch, need), dout, dtable});
  // vec4 loads need both views f32 and starting on a whole vec4 of their bindings.
  const bool vec4 = dout.dtype == DType::F32 && dtable.dtype == DType::F32 && push.dim % 4 == 0 &&
                    push.skip[1] % 4 == 0 && push.skip[2] % 4 == 0;
  const vk::SpecConstants sum_constants{{"local_size_x", workgroupSize(rec.context())},
                                        {"kAccumulate", accumulate}};
  rec.dispatchGroups(
      vec4 ? kernels.get("gather/backward_bucket4", sum_constants)
           : floatKernel(rec.context(), "gather/backward_bucket", sum_constants,
                         {{"dout_dtype", dout.dtype}, {"dtable_dtype", dtable.dtype}}),
      sum_args, &push, sizeof(push),
      strideGroups(rec.context(), uint64_t(push.vocab) * push.dim / (vec4 ? 4 : 1)));
}

}  // namespace vkgrad::ops
