// reparameterize: a VAE's sample z = mu + exp(log_sigma) * eps with eps drawn from the graph's
// on-device generator (ops/random.h). eps is never stored: the backward draws it again from
// the same generator state and stream. mu's gradient is dz itself.
#include "vkgrad/runtime/ops/reparameterize.h"

#include <string>

#include "vkgrad/ops/random.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct Reparameterize {
  enum In { mu, log_sigma, rng, kInputs };  // rng: the generator's state (Graph::rngState)
  enum Out { z, kOutputs };
  struct Attrs {
    uint32_t stream = 0;  // the generator's stream, one per call site
  };
};

struct ReparameterizeBackward {
  enum In { dz, log_sigma, rng, kInputs };
  enum Out { dlog_sigma, kOutputs };
  using Attrs = Reparameterize::Attrs;
};

void backward(Backward& b, const Node& f) {
  using R = Reparameterize;
  if (b.needs(f, R::mu)) {
    const int gid = b.gradOf(f.inputs[R::mu]);
    b.addInto(b.dout(f, R::z), gid, b.contribute(gid));
  }
  if (b.needs(f, R::log_sigma))
    b.emit(OpKind::ReparameterizeBackward, f, R::log_sigma,
           {b.dout(f, R::z), f.inputs[R::log_sigma], f.inputs[R::rng]}, f.attrs);
}

void launch(const Launch& l) {
  using R = Reparameterize;
  ops::reparameterize(l.rec, l.in(R::mu), l.in(R::log_sigma), l.out(R::z), l.in(R::rng),
                      l.attr<R::Attrs>().stream);
}

void launchBackward(const Launch& l) {
  using B = ReparameterizeBackward;
  ops::reparameterizeBackward(l.rec, l.in(B::dz), l.in(B::log_sigma), l.out(B::dlog_sigma),
                              l.in(B::rng), l.attr<B::Attrs>().stream, l.write(B::dlog_sigma));
}

}  // namespace

Tensor reparameterize(Graph& g, Tensor mu, Tensor log_sigma) {
  g.check(mu, "reparameterize");
  g.check(log_sigma, "reparameterize");
  const std::string at = g.describe("reparameterize", {mu, log_sigma});
  if (g.tensor(mu).dtype != DType::F32 || g.tensor(log_sigma).dtype != DType::F32)
    throw ShapeError(at + ": mu and log_sigma must be f32");
  if (!(g.shape(mu) == g.shape(log_sigma)))
    throw ShapeError(at + ": mu and log_sigma must have the same shape");
  if (g.shape(mu).numel() == 0) throw ShapeError(at + ": mu is empty");
  const int z = g.output(g.shape(mu));
  const Graph::RandomStream draw = g.randomStream();
  g.addNode({OpKind::Reparameterize,
             {mu.id, log_sigma.id, draw.rng},
             {z},
             {},
             Reparameterize::Attrs{draw.stream}});
  return {z};
}

namespace defs {
const OpDef kReparameterize{.name = "reparameterize",
                            .inputs = Reparameterize::kInputs,
                            .outputs = Reparameterize::kOutputs,
                            .backward = backward,
                            .launch = launch};
const OpDef kReparameterizeBackward{.name = "reparameterizeBackward",
                                    .inputs = ReparameterizeBackward::kInputs,
                                    .outputs = ReparameterizeBackward::kOutputs,
                                    .launch = launchBackward};
}  // namespace defs

}  // namespace vkgrad::graph
