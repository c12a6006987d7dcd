// vkgrad-bench attention: flash attention and the op-library reference (ops/attention_unfused.h:
// matmul, softmax, matmul, storing P) side by side, forward (and backward with --backward) on
// random (B, T, H, D) inputs. GFLOP/s count the multiply-adds of the visible (query, key) pairs:
// forward 2 products (Q·Kᵀ and P·V) = 4·pairs·D; backward 5 (S recomputed, dV, dP, dQ, dK)
// = 10·pairs·D; causal with Tq = Tk has T(T+1)/2 pairs per head, about half. device_bytes is
// the peak of what the engine allocated for the run: inputs, outputs, LSE, gradients,
// scratch; no T x T buffer.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench.h"
#include "vkgrad/core/error.h"
#include "vkgrad/ops/attention.h"
#include "vkgrad/ops/attention_unfused.h"
#include "vkgrad/ops/reference/attention.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

// The fp64 CPU check costs about 14·pairs·D flops on one core; above this it needs --check.
constexpr double kCheckLimit = 4e9;
constexpr double kCheckTolerance = 1e-4;
// The fragment kernels round Q, K, V, dO, P and dS to fp16 (fp32 sums): ~5e-4 measured at
// D = 64 on lavapipe with f32 inputs; Auto may take them where fp16 products are allowed.
constexpr double kFragmentTolerance = 3e-3;

void declare(Cli& cli) {
  cli.option("b", "batch", "1");
  cli.option("h", "heads", "4");
  cli.option("kv-heads",
             "key/value heads, dividing --h (grouped-query attention; 0: --h); flash only", "0");
  cli.option("t", "sequence length (queries and keys)", "1024");
  cli.option("d", "head dim", "64");
  cli.flag("causal", "causal mask (query i sees keys 0..i)");
  cli.flag("backward", "time forward + backward (dQ, dK, dV) instead of forward alone");
  cli.option("variant", "flash kernels: auto, shared, texel, fragment, fragment-emulated or all",
             "auto");
  cli.option("impl", "flash, reference (the op-library path that stores P) or both", "both");
}

// The sizes and modes the options ask for: Q, O (B, T, H, D), K, V (B, T, Hkv, D).
struct Problem {
  int64_t b, h, t, d;
  bool causal, backward;
  bool check;  // against the fp64 CPU reference
  int64_t hkv;

  // Visible (query, key) pairs over every head.
  double pairs() const {
    return double(b * h) * (causal ? double(t) * double(t + 1) / 2 : double(t) * double(t));
  }
  double flop() const { return (backward ? 14.0 : 4.0) * pairs() * double(d); }
  ops::Shape shape() const { return {b, t, h, d}; }
  ops::Shape kvShape() const { return {b, t, hkv, d}; }
  ops::ref::AttentionShape refShape() const {
    ops::ref::AttentionShape s{b, h, t, t, d, causal};
    s.hkv = hkv;
    return s;
  }
};

Problem parseProblem(const Cli& cli, const BenchOptions& options) {
  Problem p{cli.getInt("b", 1, 1 << 16),
            cli.getInt("h", 1, 1 << 16),
            cli.getInt("t", 1, 1 << 20),
            cli.getInt("d", 1, 256),
            cli.has("causal"),
            cli.has("backward"),
            false,
            cli.getInt("kv-heads", 0, 1 << 16)};
  if (p.hkv == 0) p.hkv = p.h;
  if (p.h % p.hkv != 0) cli.fail("--kv-heads must divide --h");
  p.check = options.check || 14.0 * p.pairs() * double(p.d) <= kCheckLimit;
  return p;
}

// The flash variants --variant names ("all": shared and texel).
std::vector<ops::AttentionVariant> parseVariants(const Cli& cli) {
  using V = ops::AttentionVariant;
  if (cli.get("variant") == "all") return {V::Shared, V::Texel};
  for (auto v : {V::Auto, V::Shared, V::Texel, V::Fragment, V::FragmentEmulated})
    if (cli.get("variant") == ops::attentionVariantName(v)) return {v};
  cli.fail("--variant must be auto, shared, texel, fragment, fragment-emulated or all, got '" +
           cli.get("variant") + "'");
}

// One implementation to time: a flash variant, or the op-library reference.
struct Candidate {
  bool flash;
  ops::AttentionVariant variant;
};

double tolerance(const vk::Context& context, const Candidate& c) {
  const bool fragment = c.variant == ops::AttentionVariant::Fragment ||
                        c.variant == ops::AttentionVariant::FragmentEmulated ||
                        (c.variant == ops::AttentionVariant::Auto && context.fp16Matmul());
  return c.flash && fragment ? kFragmentTolerance : kCheckTolerance;
}

// The flash variants asked for, then the op-library reference once.
std::vector<Candidate> candidates(const std::string& impl,
                                  const std::vector<ops::AttentionVariant>& variants) {
  std::vector<Candidate> list;
  if (impl != "reference")
    for (auto v : variants) list.push_back({true, v});
  if (impl != "flash") list.push_back({false, ops::AttentionVariant::Auto});
  return list;
}

struct Run {
  Timing timing;
  double error = NAN;
  bool checked = false;
  uint64_t device_bytes = 0;
};

// Host inputs: q, k, v and the output's gradient.
struct Inputs {
  std::vector<float> q, k, v, dout;
};

// The largest normalised error of the gradients in dq, dk and dv against the CPU reference.
double backwardError(vk::Context& context, const Problem& p, const Inputs& in, const vk::Buffer& dq,
                     const vk::Buffer& dk, const vk::Buffer& dv) {
  const size_t n = size_t(p.b * p.t * p.h * p.d), nkv = size_t(p.b * p.t * p.hkv * p.d);
  std::vector<float> want_q(n), want_k(nkv), want_v(nkv), got;
  ops::ref::attentionBackward(p.refShape(), in.q.data(), in.k.data(), in.v.data(), in.dout.data(),
                              want_q.data(), want_k.data(), want_v.data());
  double error = 0;
  for (auto [buffer, want] : {std::pair{&dq, &want_q}, {&dk, &want_k}, {&dv, &want_v}}) {
    got.resize(want->size());
    context.staging().download(*buffer, 0, got.data(), got.size() * 4);
    error = std::max(error, normalisedError(got, *want));
  }
  return error;
}

// The normalised error of the output in o against the CPU reference.
double forwardError(vk::Context& context, const Problem& p, const Inputs& in, const vk::Buffer& o) {
  const size_t n = size_t(p.b * p.t * p.h * p.d);
  std::vector<float> want(n), want_lse(size_t(p.b * p.h * p.t)), got(n);
  ops::ref::attention(p.refShape(), in.q.data(), in.k.data(), in.v.data(), want.data(),
                      want_lse.data());
  context.staging().download(o, 0, got.data(), got.size() * 4);
  return normalisedError(got, want);
}

Run runImpl(vk::Context& context, const BenchOptions& options, const Problem& p,
            ops::AttentionVariant variant, bool flash) {
  vk::Allocator& allocator = context.allocator();
  const uint64_t before = allocator.bytesInUse();
  allocator.resetPeak();
  const int64_t b = p.b, h = p.h, t = p.t, n = b * t * h * p.d, nkv = b * t * p.hkv * p.d;
  const ops::Shape shape = p.shape(), kv_shape = p.kvShape();
  std::vector<vk::Buffer> buffers;
  auto tensor = [&](int64_t elements) -> const vk::Buffer& {
    buffers.push_back(allocator.allocate(uint64_t(elements) * 4));
    return buffers.back();
  };
  buffers.reserve(12);
  const vk::Buffer &q = tensor(n), &k = tensor(nkv), &v = tensor(nkv), &o = tensor(n),
                   &lse = tensor(b * h * t);
  const Inputs in{benchData(size_t(n), -1, 1, 1), benchData(size_t(nkv), -1, 1, 2),
                  benchData(size_t(nkv), -1, 1, 3), benchData(size_t(n), -1, 1, 4)};
  context.staging().upload(q, 0, in.q.data(), in.q.size() * 4);
  context.staging().upload(k, 0, in.k.data(), in.k.size() * 4);
  context.staging().upload(v, 0, in.v.data(), in.v.size() * 4);
  const ops::AttentionOptions attn{p.causal, 0.0f, variant};
  const ops::AttentionTensor tq{ops::view(q, shape)}, tk{ops::view(k, kv_shape)},
      tv{ops::view(v, kv_shape)}, to{ops::view(o, shape)};
  const ops::TensorView tlse = ops::view(lse, {b, h, t});

  Run run;
  std::unique_ptr<ops::UnfusedAttention> unfused;
  if (!flash) unfused = std::make_unique<ops::UnfusedAttention>(context, shape, kv_shape, attn);
  auto forward = [&](vk::Recorder& rec) {
    if (flash)
      ops::attention(rec, tq, tk, tv, to, tlse, attn);
    else
      unfused->forward(rec, tq.view, tk.view, tv.view, to.view);
  };
  if (!p.backward) {
    run.timing = timeRuns(context, options.warmup, options.iters, forward);
  } else {
    const vk::Buffer &dout = tensor(n), &dq = tensor(n), &dk = tensor(nkv), &dv = tensor(nkv),
                     &scratch = tensor(ops::attentionBackwardScratch(tq));
    context.staging().upload(dout, 0, in.dout.data(), in.dout.size() * 4);
    run.timing = timeRuns(context, options.warmup, options.iters, [&](vk::Recorder& rec) {
      forward(rec);
      if (flash)
        ops::attentionBackward(rec, tq, tk, tv, to, tlse, {ops::view(dout, shape)},
                               {ops::view(dq, shape)}, {ops::view(dk, kv_shape)},
                               {ops::view(dv, kv_shape)}, ops::view(scratch, {b * h * t}), attn);
      else
        unfused->backward(rec, ops::view(dout, shape), ops::view(dq, shape), ops::view(dk, shape),
                          ops::view(dv, shape));
    });
    if (p.check) run.error = backwardError(context, p, in, dq, dk, dv);
  }
  run.device_bytes = allocator.peakBytesInUse() - before;
  if (p.check) {
    run.error = std::max(std::isnan(run.error) ? 0 : run.error, forwardError(context, p, in, o));
    run.checked = true;
  }
  return run;
}

void printRun(const vk::Context& context, const BenchOptions& options, const Problem& p,
              const Candidate& c, const Run& r) {
  const char* name = c.flash ? "flash" : "reference";
  const char* variant = c.flash ? ops::attentionVariantName(c.variant) : "ops";
  const Stats s = stats(r.timing.ms);
  const double gflops = p.flop() / (s.median * 1e6);
  const bool ok = !r.checked || r.error <= tolerance(context, c);
  if (options.json) {
    printJsonLine({{"op", "attention"},
                   {"impl", name},
                   {"variant", variant},
                   {"b", p.b},
                   {"h", p.h},
                   {"kv_heads", p.hkv},
                   {"t", p.t},
                   {"d", p.d},
                   {"causal", p.causal},
                   {"backward", p.backward},
                   {"ms", s.median},
                   {"min_ms", s.min},
                   {"max_ms", s.max},
                   {"gflop", p.flop() * 1e-9},
                   {"gflops", gflops},
                   {"device_bytes", r.device_bytes},
                   {"iters", options.iters},
                   {"warmup", options.warmup},
                   {"cpu_ms", r.timing.cpu_ms},
                   {"checked", r.checked},
                   {"error", r.error},
                   {"device", context.info().name}});
  } else {
    std::printf(
        "attention %-9s %-6s B%lld H%lld%s T%lld D%lld%s%s  %10.3f ms  %9.2f GFLOP/s  "
        "%8.1f MiB on device  (min %.3f, max %.3f)  %s\n",
        name, variant, (long long)p.b, (long long)p.h,
        p.hkv != p.h ? ("/" + std::to_string(p.hkv)).c_str() : "", (long long)p.t, (long long)p.d,
        p.causal ? " causal" : "", p.backward ? " +bwd" : "", s.median, gflops,
        double(r.device_bytes) / (1 << 20), s.min, s.max,
        r.checked ? ("error " + std::to_string(r.error) + (ok ? "" : "  WRONG")).c_str()
                  : "not checked (large; --check forces it)");
  }
  std::fflush(stdout);
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const Problem p = parseProblem(cli, options);
  std::fprintf(stderr, "vkgrad-bench: attention B %lld H %lld T %lld D %lld%s%s on %s\n",
               (long long)p.b, (long long)p.h, (long long)p.t, (long long)p.d,
               p.causal ? " causal" : "", p.backward ? " +backward" : "",
               context.info().name.c_str());
  const std::vector<ops::AttentionVariant> variants = parseVariants(cli);
  const std::string impl = parseChoice(cli, "impl", {"flash", "reference", "both"});
  int exit_code = 0;
  for (const Candidate& c : candidates(impl, variants)) {
    const char* name = c.flash ? "flash" : "reference";
    Run r;
    try {
      r = runImpl(context, options, p, c.variant, c.flash);
    } catch (const Error& e) {
      // The reference stores B·H·T·T scores; at long T they exceed the device. With --variant
      // all, a variant the device cannot run is left out.
      if (c.flash && variants.size() == 1) throw;
      std::fprintf(stderr, "vkgrad-bench: attention %s%s%s skipped: %s\n", name, c.flash ? " " : "",
                   c.flash ? ops::attentionVariantName(c.variant) : "", e.what());
      continue;
    }
    printRun(context, options, p, c, r);
    if (r.checked)
      exit_code |= failIfWrong(std::string("attention ") + name, r.error, tolerance(context, c));
  }
  return exit_code;
}

}  // namespace

const BenchOp& attentionBench() {
  static const BenchOp op{
      "attention", "flash attention and the op-library reference over (B, T, H, D)", declare, run};
  return op;
}

}  // namespace vkgrad::apps
