// vkgrad-bench conv2d: a 2-D convolution (ops/conv2d.h) two ways, im2col + the matmul kernels
// (what the graph runs) and one direct kernel (an invocation per output), forward, and the
// backward (dx, dw, dbias) of the im2col route. FLOPs: 2 N O OH OW (C/G) KH KW per product;
// the backward does two such products (dx and dw). The defaults are a ResNet stage's 3x3
// convolution at batch 8; bench/peers/conv2d_torch.py times PyTorch on the same shapes.
#include <cstdio>
#include <vector>

#include "bench.h"
#include "vkgrad/ops/conv2d.h"
#include "vkgrad/ops/reference/conv2d.h"
#include "vkgrad/vk/memory.h"
#include "vkgrad/vk/staging.h"

namespace vkgrad::apps {
namespace {

void declare(Cli& cli) {
  cli.option("n", "images N", "8");
  cli.option("c", "input channels C", "64");
  cli.option("size", "image height and width", "56");
  cli.option("o", "output channels O", "64");
  cli.option("k", "kernel height and width", "3");
  cli.option("stride", "stride", "1");
  cli.option("pad", "padding on every side", "1");
  cli.option("variant", "im2col, direct, backward (im2col's dx, dw, dbias) or all", "all");
}

vk::Buffer upload(vk::Context& context, const std::vector<float>& data) {
  vk::Buffer b = context.allocator().allocate(data.size() * 4);
  context.staging().upload(b, 0, data.data(), data.size() * 4);
  return b;
}

int run(const Cli& cli, vk::Context& context, const BenchOptions& options) {
  const int64_t n = cli.getInt("n", 1, 4096), c = cli.getInt("c", 1, 4096),
                s = cli.getInt("size", 1, 4096), o = cli.getInt("o", 1, 4096),
                k = cli.getInt("k", 1, 64);
  const ops::Conv2dParams p =
      ops::Conv2dParams::square(cli.getInt("stride", 1, 64), cli.getInt("pad", 0, 64));
  const std::string variant = parseChoice(cli, "variant", {"im2col", "direct", "backward", "all"});
  const ops::Shape xs{n, c, s, s}, ws{o, c, k, k};
  const ops::Shape ys = ops::conv2dShape(xs, ws, nullptr, p);
  const double flops = 2.0 * double(ys.numel()) * double(c * k * k);
  std::fprintf(stderr, "vkgrad-bench: conv2d x %s w %s -> %s, %s, %.2f GFLOP per product on %s\n",
               xs.str().c_str(), ws.str().c_str(), ys.str().c_str(), p.str().c_str(), flops / 1e9,
               context.info().name.c_str());

  const std::vector<float> x = benchData(size_t(xs.numel()), -1.0f, 1.0f, 1),
                           w = benchData(size_t(ws.numel()), -0.2f, 0.2f, 2),
                           bias = benchData(size_t(o), -1.0f, 1.0f, 3),
                           dy = benchData(size_t(ys.numel()), -1.0f, 1.0f, 4);
  const vk::Buffer bx = upload(context, x), bw = upload(context, w), bb = upload(context, bias),
                   bdy = upload(context, dy);
  vk::Buffer by = context.allocator().allocate(uint64_t(ys.numel()) * 4),
             bdx = context.allocator().allocate(uint64_t(xs.numel()) * 4),
             bdw = context.allocator().allocate(uint64_t(ws.numel()) * 4),
             bdb = context.allocator().allocate(uint64_t(o) * 4),
             bs = context.allocator().allocate(uint64_t(ops::conv2dScratch(xs, ws, p)) * 4);
  const ops::TensorView xv = ops::view(bx, xs), wv = ops::view(bw, ws), bv = ops::view(bb, {o}),
                        yv = ops::view(by, ys), dyv = ops::view(bdy, ys), dxv = ops::view(bdx, xs),
                        dwv = ops::view(bdw, ws), dbv = ops::view(bdb, {o}),
                        sv = ops::view(bs, {ops::conv2dScratch(xs, ws, p)});

  const std::vector<float> want = ops::ref::conv2d(x, xs, w, ws, bias, p);
  int failed = 0;
  for (const char* v : {"im2col", "direct", "backward"}) {
    if (variant != "all" && variant != v) continue;
    const bool backward = std::string(v) == "backward";
    const Timing t =
        timeDispatches(context, options, std::string("conv2d ") + v, [&](vk::Recorder& rec) {
          if (backward)
            ops::conv2dBackward(rec, xv, wv, dyv, {&dxv, &dwv, &dbv}, sv, p);
          else if (std::string(v) == "im2col")
            ops::conv2d(rec, xv, wv, &bv, yv, sv, p);
          else
            ops::conv2dDirect(rec, xv, wv, &bv, yv, p);
        });
    double error = 0;
    if (!backward) {
      std::vector<float> got(size_t(ys.numel()));
      context.staging().download(by, 0, got.data(), got.size() * 4);
      error = normalisedError(got, want);
    }
    const Stats st = stats(t.ms);
    const double gflops = (backward ? 2.0 : 1.0) * flops / (st.median * 1e6);
    if (options.json)
      printJsonLine({{"op", "conv2d"},
                     {"variant", v},
                     {"n", n},
                     {"c", c},
                     {"size", s},
                     {"o", o},
                     {"k", k},
                     {"ms", st.median},
                     {"ms_min", st.min},
                     {"ms_max", st.max},
                     {"gflops", gflops},
                     {"error", error},
                     {"device", deviceDescription(context)}});
    else
      std::printf(
          "conv2d %-8s N %lld C %lld %lldx%lld O %lld k %lld: %8.3f ms (%.3f-%.3f) "
          "%6.1f GFLOP/s  error %.1e\n",
          v, (long long)n, (long long)c, (long long)s, (long long)s, (long long)o, (long long)k,
          st.median, st.min, st.max, gflops, error);
    // Float sums of C·K² products of numbers in [-1, 1] x [-0.2, 0.2], against double.
    failed |= failIfWrong(std::string("conv2d ") + v, error, 1e-5);
  }
  return failed;
}

}  // namespace

const BenchOp& conv2dBench() {
  static const BenchOp op{"conv2d",
                          "y = x * w + b, NCHW: im2col + matmul against one direct kernel, and "
                          "the backward; GFLOP/s = 2 N O OH OW C K^2 per product",
                          declare, run};
  return op;
}

}  // namespace vkgrad::apps
