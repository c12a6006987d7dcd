#include "vkgrad/ops/optimizer.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "vkgrad/core/error.h"
#include "vkgrad/ops/binding.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/kernel.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::ops {
namespace {

// Gradient-norm partials: a 64-wide tree per workgroup (6 barriers), at least 1024
// elements per workgroup, at most 1024 partials per tensor. CPU devices run a workgroup's
// barriers as switches between its subgroups, so there a workgroup takes 16384 elements:
// the GPT's gradient norm (823,552 elements in one dispatch) 5.3-5.9 -> 1.2-1.4 ms on
// lavapipe (BENCHMARKS.md). gradNormScratch counts with the smaller chunk: an upper bound.
constexpr uint32_t kNormWorkgroup = 64;
constexpr uint32_t kNormChunk = 1024;
constexpr uint32_t kNormChunkOnCpu = 16384;
constexpr uint32_t kMaxPartials = 1024;

struct SgdPush {
  uint32_t n;
  float momentum, weight_decay;
  uint32_t nesterov;
};
static_assert(sizeof(SgdPush) == 16);

struct AdamWPush {
  uint32_t n;
  float eps, weight_decay;
  uint32_t p_skip, g_skip, m_skip, v_skip;  // texel variant: first elements in the bindings
};
static_assert(sizeof(AdamWPush) == 28);

struct SumsqPush {
  uint32_t n, base, skip;  // elements; first partial slot of this tensor; first element
};
static_assert(sizeof(SumsqPush) == 12);

struct SumsqTexelPush {
  uint32_t n, base, skip;  // elements; first partial slot; first element in the binding
};
static_assert(sizeof(SumsqTexelPush) == 12);

struct SumsqManyPush {
  uint32_t count, base, at;  // tensors; first partial slot; the table's first word
};
static_assert(sizeof(SumsqManyPush) == 12);

struct NormPush {
  uint32_t count;  // partial slots in all
  float max_norm;
};
static_assert(sizeof(NormPush) == 8);

struct ScalePush {
  uint32_t n;
};
static_assert(sizeof(ScalePush) == 4);

vk::Arg arg(const TensorView& t) {
  return {*t.buffer, t.offset, t.bytes()};
}

void checkState(const char* op, const TensorView& state) {
  if (state.shape.numel() < 8)
    throw ShapeError(std::string(op) + ": optimizer state " + state.shape.str() +
                     " must hold 8 u32 words (OptimizerState)");
  checkFits(op, "state", state, DType::U32);
}

vk::Arg stateArg(const TensorView& state) {
  return {*state.buffer, state.offset, 32};
}

// Checks that every tensor has param's shape, is f32 and fits; returns the element count.
uint32_t checkTensors(const char* op,
                      std::initializer_list<std::pair<const char*, const TensorView*>> tensors) {
  const TensorView& first = *tensors.begin()->second;
  std::string shapes;
  for (auto [name, t] : tensors)
    shapes += std::string(shapes.empty() ? "" : ", ") + name + " " + t->shape.str();
  for (auto [name, t] : tensors)
    if (!(t->shape == first.shape))
      throw ShapeError(std::string(op) + ": " + shapes + ": shapes must be equal");
  if (first.shape.numel() == 0) throw ShapeError(std::string(op) + ": " + shapes + ": empty");
  if (first.shape.numel() > int64_t(UINT32_MAX))
    throw ShapeError(std::string(op) + ": " + shapes + ": more than 2^32 - 1 elements");
  for (auto [name, t] : tensors) checkFits(op, name, *t);
  return uint32_t(first.shape.numel());
}

uint32_t partialsFor(int64_t n, uint32_t chunk = kNormChunk) {
  return std::min<uint32_t>(vk::divUp(uint64_t(n), chunk), kMaxPartials);
}

// Words of a segment table entry, as optimizer/adamw.glsl and optimizer/sumsq_texel.glsl read them:
// the tensor's first element in the param, grad, m and v bindings, its size, its weight decay
// (f32 bits), its first workgroup and its workgroup count.
constexpr int64_t kSegmentWords = 8;

// The binding that spans views of one role (params, grads, ...) of a run of tensors: every
// view in one buffer, from the binding alignment at or below the first to the end of the last.
struct Span {
  const vk::Buffer* buffer = nullptr;
  uint64_t lo = 0, hi = 0;  // bytes into buffer
  // The span with t added, if it stays within `limit` bytes.
  static std::optional<Span> join(const Span& s, const vk::Context& ctx, const TensorView& t,
                                  uint64_t limit) {
    const uint64_t align = bindingAlignment(ctx);
    const uint64_t lo = t.offset - (t.buffer->offset() + t.offset) % align;
    Span out{t.buffer, lo, t.offset + t.bytes()};
    if (s.buffer) {
      if (s.buffer != t.buffer) return std::nullopt;
      out = {s.buffer, std::min(s.lo, lo), std::max(s.hi, out.hi)};
    }
    if (out.hi - out.lo > limit) return std::nullopt;
    return out;
  }
  vk::Arg arg(vk::TexelFormat texel = vk::TexelFormat::Rgba32f) const {
    return {*buffer, lo, hi - lo, texel};
  }
  uint32_t skip(const TensorView& t) const { return uint32_t((t.offset - lo) / 4); }
};

// Tensors [begin, end) that one dispatch takes, with the binding of each role that spans them.
struct Run {
  size_t begin = 0, end = 0;
  std::vector<Span> spans;  // one per role
};

// Splits [0, count) into runs of consecutive tensors whose views of each role (roles(i) lists
// tensor i's) fit one Span each, and whose workgroups (groups(i)) one dispatch can launch; a
// tensor that cannot be read through a span (ok(i) false) is a run of its own.
template <class Views, class Ok, class Groups>
std::vector<Run> runs(const vk::Context& ctx, size_t count, uint64_t limit, Views roles, Ok ok,
                      Groups groups) {
  std::vector<Run> out;
  uint64_t launched = 0;
  for (size_t i = 0; i < count; ++i) {
    const auto views = roles(i);
    bool fits = !out.empty() && ok(i) && ok(out.back().begin) &&
                launched + groups(i) <= ctx.info().max_workgroup_count[0];
    std::vector<Span> joined(views.size());
    for (size_t r = 0; fits && r < views.size(); ++r) {
      const auto s = Span::join(out.back().spans[r], ctx, *views[r], limit);
      if (s) joined[r] = *s;
      fits = fits && s.has_value();
    }
    if (fits) {
      out.back().spans = std::move(joined);
      out.back().end = i + 1;
      launched += groups(i);
      continue;
    }
    out.push_back({i, i + 1, std::vector<Span>(views.size())});
    for (size_t r = 0; r < views.size(); ++r)
      out.back().spans[r] = Span::join(Span{}, ctx, *views[r], UINT64_MAX).value();
    launched = groups(i);
  }
  return out;
}

// The most bytes a span read through RGBA32F texels and stored through storage may cover.
uint64_t spanLimit(const vk::Context& ctx) {
  return std::min<uint64_t>(
      {ctx.info().max_storage_buffer_range,
       std::min<uint64_t>(ctx.info().max_texel_buffer_elements, INT32_MAX) * 16});
}

// Writes a run's table entries (from entry `begin`) into `table` when the recording runs;
// returns the table's storage binding and the run's first word in it.
std::pair<vk::Arg, uint32_t> writeTable(vk::Recorder& rec, const TensorView& table, size_t begin,
                                        const std::vector<uint32_t>& words) {
  rec.update(*table.buffer, table.offset + uint64_t(begin) * kSegmentWords * 4, words.data(),
             words.size() * 4);
  const Bound b = bindStorage(rec.context(), table);
  return {b.arg, b.skip + uint32_t(begin * kSegmentWords)};
}

void checkTable(const char* op, const TensorView& table, size_t tensors) {
  checkFits(op, "table", table, DType::U32);
  if (table.shape.numel() < segmentTableWords(tensors))
    throw ShapeError(std::string(op) + ": table " + table.shape.str() + " holds fewer than the " +
                     std::to_string(segmentTableWords(tensors)) + " u32 words " +
                     std::to_string(tensors) + " tensors need");
}

}  // namespace

int64_t segmentTableWords(size_t tensors) {
  return kSegmentWords * int64_t(tensors);
}

void advanceStep(vk::Recorder& rec, const TensorView& state) {
  checkState("advanceStep", state);
  const vk::Arg args[] = {stateArg(state)};
  rec.dispatchGroups(rec.context().kernels().get("optimizer/advance"), args, nullptr, 0, 1);
}

void sgd(vk::Recorder& rec, const TensorView& param, const TensorView& grad,
         const TensorView& velocity, const TensorView& state, const SgdOptions& options) {
  const uint32_t n =
      checkTensors("sgd", {{"param", &param}, {"grad", &grad}, {"velocity", &velocity}});
  checkState("sgd", state);
  const SgdPush push{n, options.momentum, options.weight_decay, options.nesterov ? 1u : 0u};
  const vk::Arg args[] = {arg(param), arg(grad), arg(velocity), stateArg(state)};
  rec.dispatchGroups(rec.context().kernels().get("optimizer/sgd",
                                                 {{"local_size_x", workgroupSize(rec.context())}}),
                     args, &push, sizeof(push),
                     gridGroups(rec.context(), n, workgroupSize(rec.context())));
}

void adamw(vk::Recorder& rec, const TensorView& param, const TensorView& grad, const TensorView& m,
           const TensorView& v, const TensorView& state, const AdamWOptions& options) {
  const uint32_t n =
      checkTensors("adamw", {{"param", &param}, {"grad", &grad}, {"m", &m}, {"v", &v}});
  checkState("adamw", state);
  vk::Context& ctx = rec.context();
  constexpr vk::TexelFormat kRgba = vk::TexelFormat::Rgba32f;
  // The texel kernel reads param, m and v as texels and writes them as vec4s with one skip
  // per view, so both bindings of each must start the same whole texels before it.
  bool texel_ok = texelFits(ctx, grad, kRgba);
  for (const TensorView* t : {&param, &m, &v})
    texel_ok = texel_ok && texelFits(ctx, *t, kRgba) && vec4Storable(ctx, *t) &&
               bindTexel(ctx, *t, kRgba).skip == bindStorage(ctx, *t).skip;
  AdamWVariant variant = options.variant;
  if (variant == AdamWVariant::Auto)
    variant = texel_ok ? AdamWVariant::Texel : AdamWVariant::Storage;
  if (variant == AdamWVariant::Texel && !texel_ok)
    throw Error("adamw: param, grad, m and v " + param.shape.str() +
                " cannot all be read as RGBA32F texels and stored 16 bytes at a time (each "
                "must start on 16 bytes)");
  if (variant == AdamWVariant::Storage && ctx.info().max_storage_buffers < 5) {
    // param, grad, m, v and the state are 5 storage buffers: on a device that binds 4 the
    // ".sb4" build updates m and v in one pass and param in a second (the same bits).
    const AdamWPush push{n, options.eps, options.weight_decay, 0, 0, 0, 0};
    for (const uint32_t pass : {0u, 1u}) {
      const vk::Arg args[] = {arg(pass == 0 ? grad : param), arg(m), arg(v), stateArg(state)};
      rec.dispatchGroups(ctx.kernels().get("optimizer/adamw.sb4",
                                           {{"local_size_x", workgroupSize(ctx)}, {"PASS", pass}}),
                         args, &push, sizeof(push),
                         gridGroups(rec.context(), n, workgroupSize(rec.context())));
    }
    return;
  }
  if (variant == AdamWVariant::Storage) {
    const AdamWPush push{n, options.eps, options.weight_decay, 0, 0, 0, 0};
    const vk::Arg args[] = {arg(param), arg(grad), arg(m), arg(v), stateArg(state)};
    rec.dispatchGroups(ctx.kernels().get("optimizer/adamw", {{"local_size_x", workgroupSize(ctx)}}),
                       args, &push, sizeof(push),
                       gridGroups(rec.context(), n, workgroupSize(rec.context())));
    return;
  }
  const Bound tp = bindTexel(ctx, param, kRgba), tg = bindTexel(ctx, grad, kRgba),
              tm = bindTexel(ctx, m, kRgba), tv = bindTexel(ctx, v, kRgba);
  const AdamWPush push{n, options.eps, options.weight_decay, tp.skip, tg.skip, tm.skip, tv.skip};
  const vk::Arg args[] = {tp.arg,
                          tg.arg,
                          tm.arg,
                          tv.arg,
                          stateArg(state),
                          bindStorage(ctx, param).arg,
                          bindStorage(ctx, m).arg,
                          bindStorage(ctx, v).arg};
  rec.dispatchGroups(
      ctx.kernels().get("optimizer/adamw_texel", {{"local_size_x", workgroupSize(ctx)}}), args,
      &push, sizeof(push), gridGroups(ctx, (uint64_t(n) + 3) / 4, workgroupSize(ctx)));
}

void adamwMany(vk::Recorder& rec, std::span<const AdamWTensor> tensors, const TensorView& state,
               const TensorView& table, const AdamWOptions& options) {
  if (tensors.empty()) throw ShapeError("adamwMany: no tensors");
  checkState("adamwMany", state);
  checkTable("adamwMany", table, tensors.size());
  auto one = [&](const AdamWTensor& t, AdamWVariant variant) {
    adamw(rec, t.param, t.grad, t.m, t.v, state, {options.eps, t.weight_decay, variant});
  };
  // The many-tensor kernel binds the state, the table and param, m and v as storage buffers:
  // a device that binds 4 updates one tensor at a time.
  if (options.variant != AdamWVariant::Auto || rec.context().info().max_storage_buffers < 5) {
    for (const AdamWTensor& t : tensors) one(t, options.variant);
    return;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    const std::string name = "tensors[" + std::to_string(i) + "]";
    const AdamWTensor& t = tensors[i];
    checkTensors(("adamwMany: " + name).c_str(),
                 {{"param", &t.param}, {"grad", &t.grad}, {"m", &t.m}, {"v", &t.v}});
  }
  vk::Context& ctx = rec.context();
  constexpr vk::TexelFormat kRgba = vk::TexelFormat::Rgba32f;
  auto views = [&](size_t i) {
    const AdamWTensor& t = tensors[i];
    return std::array<const TensorView*, 4>{&t.param, &t.grad, &t.m, &t.v};
  };
  // A tensor joins a run when all four views are RGBA32F-readable (on 16 bytes): texel i of
  // its binding is then elements 4i..4i+3 of the view, and the kernel stores whole texels.
  auto ok = [&](size_t i) {
    for (const TensorView* v : views(i))
      if (!texelFits(ctx, *v, kRgba)) return false;
    return true;
  };
  auto groups = [&](size_t i) {
    return gridGroups(ctx, (uint64_t(tensors[i].param.shape.numel()) + 3) / 4, workgroupSize(ctx));
  };
  const vk::Kernel& kernel =
      ctx.kernels().get("optimizer/adamw_many", {{"local_size_x", workgroupSize(ctx)}});
  for (const Run& run : runs(ctx, tensors.size(), spanLimit(ctx), views, ok, groups)) {
    const size_t begin = run.begin, end = run.end;
    if (end - begin == 1) {
      one(tensors[begin], AdamWVariant::Auto);
      continue;
    }
    const std::vector<Span>& spans = run.spans;
    std::vector<uint32_t> words;
    uint32_t first = 0;
    for (size_t i = begin; i < end; ++i) {
      const AdamWTensor& t = tensors[i];
      const uint32_t g = groups(i);
      words.insert(words.end(), {spans[0].skip(t.param), spans[1].skip(t.grad), spans[2].skip(t.m),
                                 spans[3].skip(t.v), uint32_t(t.param.shape.numel()),
                                 std::bit_cast<uint32_t>(t.weight_decay), first, g});
      first += g;
    }
    const auto [table_arg, at] = writeTable(rec, table, begin, words);
    const struct {
      uint32_t count;
      float eps;
      uint32_t at;
    } push{uint32_t(end - begin), options.eps, at};
    const vk::Arg args[] = {spans[0].arg(), spans[1].arg(),  spans[2].arg(),
                            spans[3].arg(), stateArg(state), spans[0].arg(),
                            spans[2].arg(), spans[3].arg(),  table_arg};
    rec.dispatchGroups(kernel, args, &push, sizeof(push), first);
  }
}

int64_t gradNormScratch(std::span<const TensorView> grads) {
  int64_t slots = 0;
  for (const TensorView& g : grads) slots += partialsFor(g.shape.numel());
  return slots;
}

void gradNorm(vk::Recorder& rec, std::span<const TensorView> grads, const TensorView& scratch,
              const TensorView& norm, float max_norm, const TensorView& table) {
  if (grads.empty()) throw ShapeError("gradNorm: no gradients");
  for (size_t i = 0; i < grads.size(); ++i) {
    const std::string name = "grads[" + std::to_string(i) + "]";
    checkTensors("gradNorm", {{name.c_str(), &grads[i]}});
  }
  const int64_t slots = gradNormScratch(grads);
  if (scratch.shape.numel() < slots)
    throw ShapeError("gradNorm: scratch " + scratch.shape.str() + " holds fewer than the " +
                     std::to_string(slots) + " partial sums these gradients need");
  checkFits("gradNorm", "scratch", scratch);
  if (norm.shape.numel() < 2)
    throw ShapeError("gradNorm: norm " + norm.shape.str() + " must hold 2 floats {norm, scale}");
  checkFits("gradNorm", "norm", norm);
  if (!(max_norm > 0.0f))
    throw ShapeError("gradNorm: max_norm " + std::to_string(max_norm) + " must be positive");

  if (table.buffer) checkTable("gradNorm", table, grads.size());

  vk::Context& ctx = rec.context();
  vk::KernelCache& kernels = ctx.kernels();
  constexpr vk::TexelFormat kRgba = vk::TexelFormat::Rgba32f;
  const vk::Arg scratch_arg{*scratch.buffer, scratch.offset, uint64_t(slots) * 4};
  uint32_t base = 0;
  const uint32_t chunk = ctx.info().isCpu() ? kNormChunkOnCpu : kNormChunk;
  // RGBA32F texel fetches where the view starts on 16 bytes, else one float at a time.
  auto texel = [&](const TensorView& g) { return texelFits(ctx, g, kRgba); };
  auto one = [&](const TensorView& g) {
    const uint32_t groups = partialsFor(g.shape.numel(), chunk);
    if (texel(g)) {
      const Bound b = bindTexel(ctx, g, kRgba);
      const SumsqTexelPush push{uint32_t(g.shape.numel()), base, b.skip};
      const vk::Arg args[] = {b.arg, scratch_arg};
      rec.dispatchGroups(kernels.get("optimizer/sumsq_texel", {{"local_size_x", kNormWorkgroup}}),
                         args, &push, sizeof(push), groups);
    } else {
      const Bound b = bindStorage(ctx, g);
      const SumsqPush push{uint32_t(g.shape.numel()), base, b.skip};
      const vk::Arg args[] = {b.arg, scratch_arg};
      rec.dispatchGroups(kernels.get("optimizer/sumsq", {{"local_size_x", kNormWorkgroup}}), args,
                         &push, sizeof(push), groups);
    }
    base += groups;
  };
  if (!table.buffer) {
    for (const TensorView& g : grads) one(g);
  } else {
    auto views = [&](size_t i) { return std::array<const TensorView*, 1>{&grads[i]}; };
    auto groups = [&](size_t i) { return partialsFor(grads[i].shape.numel(), chunk); };
    auto ok = [&](size_t i) { return texel(grads[i]); };
    const vk::Kernel& many =
        kernels.get("optimizer/sumsq_many", {{"local_size_x", kNormWorkgroup}});
    for (const Run& run : runs(ctx, grads.size(), spanLimit(ctx), views, ok, groups)) {
      const size_t begin = run.begin, end = run.end;
      if (end - begin == 1) {
        one(grads[begin]);
        continue;
      }
      const Span& span = run.spans[0];
      std::vector<uint32_t> words;
      uint32_t first = 0;
      for (size_t i = begin; i < end; ++i) {
        const uint32_t g = groups(i);
        words.insert(words.end(),
                     {0, span.skip(grads[i]), 0, 0, uint32_t(grads[i].shape.numel()), 0, first, g});
        first += g;
      }
      const auto [table_arg, at] = writeTable(rec, table, begin, words);
      const SumsqManyPush push{uint32_t(end - begin), base, at};
      const vk::Arg args[] = {span.arg(), scratch_arg, table_arg};
      rec.dispatchGroups(many, args, &push, sizeof(push), first);
      base += first;
    }
  }
  const NormPush push{base, max_norm};
  const vk::Arg args[] = {scratch_arg, {*norm.buffer, norm.offset, 8}};
  rec.dispatchGroups(kernels.get("optimizer/norm", {{"local_size_x", kNormWorkgroup}}), args, &push,
                     sizeof(push), 1);
}

void clipGradNorm(vk::Recorder& rec, std::span<const TensorView> grads, float max_norm,
                  const TensorView& scratch, const TensorView& norm, const TensorView& table) {
  if (!std::isfinite(max_norm))
    throw ShapeError("clipGradNorm: max_norm " + std::to_string(max_norm) + " must be finite");
  gradNorm(rec, grads, scratch, norm, max_norm, table);
  const vk::Kernel& scale = rec.context().kernels().get(
      "optimizer/scale", {{"local_size_x", workgroupSize(rec.context())}});
  for (const TensorView& g : grads) {
    const ScalePush push{uint32_t(g.shape.numel())};
    const vk::Arg args[] = {arg(g), {*norm.buffer, norm.offset, 8}};
    rec.dispatchGroups(scale, args, &push, sizeof(push),
                       gridGroups(rec.context(), push.n, workgroupSize(rec.context())));
  }
}

void clipGradScale(vk::Recorder& rec, std::span<const TensorView> grads, float max_norm,
                   const TensorView& scratch, const TensorView& norm, const TensorView& state,
                   const TensorView& table) {
  if (!std::isfinite(max_norm))
    throw ShapeError("clipGradScale: max_norm " + std::to_string(max_norm) + " must be finite");
  checkState("clipGradScale", state);
  gradNorm(rec, grads, scratch, norm, max_norm, table);
  const vk::Arg args[] = {{*norm.buffer, norm.offset, 8}, stateArg(state)};
  rec.dispatchGroups(rec.context().kernels().get("optimizer/set_scale"), args, nullptr, 0, 1);
}

void updateLossScale(vk::Recorder& rec, const TensorView& norm, const TensorView& scale,
                     const TensorView& counters, const TensorView& state, float max_norm,
                     const LossScaleOptions& options) {
  const char* op = "updateLossScale";
  checkState(op, state);
  checkFits(op, "norm", norm);
  checkFits(op, "scale", scale);
  checkFits(op, "counters", counters, DType::U32);
  if (norm.shape.numel() < 1 || scale.shape.numel() != 1 ||
      counters.shape.numel() != kLossScaleCounters)
    throw ShapeError(std::string(op) + ": norm " + norm.shape.str() + ", scale " +
                     scale.shape.str() + " and counters " + counters.shape.str() +
                     " must hold >= 1, 1 and " + std::to_string(kLossScaleCounters) + " elements");
  if (!(options.growth >= 1.0f) || !(options.backoff > 0.0f && options.backoff <= 1.0f) ||
      options.interval == 0 || !(options.min_scale > 0.0f) ||
      !(options.max_scale >= options.min_scale) || !std::isfinite(options.max_scale) ||
      !(max_norm >= 0.0f) || !std::isfinite(max_norm))
    throw ShapeError(std::string(op) + ": growth >= 1, 0 < backoff <= 1, interval > 0, " +
                     "0 < min_scale <= max_scale (finite) and a finite max_norm >= 0, please");
  struct Push {
    float max_norm, growth, backoff;
    uint32_t interval;
    float min_scale, max_scale;
  } push{max_norm,         options.growth,    options.backoff,
         options.interval, options.min_scale, options.max_scale};
  static_assert(sizeof(Push) == 24);
  const vk::Arg args[] = {{*norm.buffer, norm.offset, 4},
                          {*scale.buffer, scale.offset, 4},
                          {*counters.buffer, counters.offset, 4 * kLossScaleCounters},
                          stateArg(state)};
  rec.dispatchGroups(rec.context().kernels().get("optimizer/loss_scale"), args, &push, sizeof(push),
                     1);
}

}  // namespace vkgrad::ops
