// The two terms of a VAE's loss (ops/vae_loss.h), each a fused node with its row sums as a
// second output: reconstructionLoss (logits against images, Bernoulli cross-entropy or
// squared error) and gaussianKl (the encoder's Gaussian against N(0, I)). Each backward is
// one elementwise node per gradient, reading the upstream gradient on the device.
#include "vkgrad/runtime/ops/vae_loss.h"

#include "vkgrad/ops/vae_loss.h"
#include "vkgrad/runtime/backward.h"
#include "vkgrad/runtime/launch.h"
#include "vkgrad/runtime/ops/defs.h"

namespace vkgrad::graph {
namespace {

struct ReconstructionLoss {
  enum In { logits, targets, kInputs };
  enum Out { mean, rows, kOutputs };  // mean: (1); rows: (B), each image's error
  struct Attrs {
    ops::Reconstruction kind = ops::Reconstruction::Bce;
  };
};

struct ReconstructionLossBackward {
  enum In { logits, targets, dmean, kInputs };
  enum Out { dlogits, kOutputs };
  using Attrs = ReconstructionLoss::Attrs;
};

struct GaussianKl {
  enum In { mu, log_sigma, kInputs };
  enum Out { mean, rows, kOutputs };
};

struct GaussianKlBackward {
  enum In { mu, log_sigma, dmean, kInputs };
  enum Out { grad, kOutputs };  // of mu or of log_sigma, as the attribute says
  struct Attrs {
    ops::KlInput input = ops::KlInput::Mu;
  };
};

void reconstructionBackward(Backward& b, const Node& f) {
  using R = ReconstructionLoss;
  if (b.needs(f, R::logits))
    b.emit(OpKind::ReconstructionLossBackward, f, R::logits,
           {f.inputs[R::logits], f.inputs[R::targets], b.dout(f, R::mean)}, f.attrs);
}

void launchReconstruction(const Launch& l) {
  using R = ReconstructionLoss;
  ops::reconstructionLoss(l.rec, l.attr<R::Attrs>().kind, l.in(R::logits), l.in(R::targets),
                          l.out(R::rows), l.out(R::mean));
}

void launchReconstructionBackward(const Launch& l) {
  using B = ReconstructionLossBackward;
  ops::reconstructionLossBackward(l.rec, l.attr<B::Attrs>().kind, l.in(B::logits), l.in(B::targets),
                                  l.in(B::dmean), l.out(B::dlogits), l.write(B::dlogits));
}

void klBackward(Backward& b, const Node& f) {
  using K = GaussianKl;
  for (const auto& [slot, input] :
       {std::pair{K::mu, ops::KlInput::Mu}, std::pair{K::log_sigma, ops::KlInput::LogSigma}})
    if (b.needs(f, slot))
      b.emit(OpKind::GaussianKlBackward, f, slot,
             {f.inputs[K::mu], f.inputs[K::log_sigma], b.dout(f, K::mean)},
             GaussianKlBackward::Attrs{input});
}

void launchKl(const Launch& l) {
  using K = GaussianKl;
  ops::gaussianKl(l.rec, l.in(K::mu), l.in(K::log_sigma), l.out(K::rows), l.out(K::mean));
}

void launchKlBackward(const Launch& l) {
  using B = GaussianKlBackward;
  ops::gaussianKlBackward(l.rec, l.attr<B::Attrs>().input, l.in(B::mu), l.in(B::log_sigma),
                          l.in(B::dmean), l.out(B::grad), l.write(B::grad));
}

}  // namespace

Tensor reconstructionLoss(Graph& g, Tensor logits, Tensor targets, ops::Reconstruction kind) {
  g.check(logits, "reconstructionLoss");
  g.check(targets, "reconstructionLoss");
  if (g.tensor(logits).dtype != DType::F32 || g.tensor(targets).dtype != DType::F32)
    throw ShapeError(g.describe("reconstructionLoss", {logits, targets}) +
                     ": logits and targets must be f32");
  const Shape rows = ops::rowLossShape("reconstructionLoss", "logits", g.shape(logits), "targets",
                                       g.shape(targets));
  const int mean = g.output({1});
  const int per_row = g.output(rows, DType::F32, false, "reconstructionLoss.rows");
  g.addNode({OpKind::ReconstructionLoss,
             {logits.id, targets.id},
             {mean, per_row},
             {},
             ReconstructionLoss::Attrs{kind}});
  return {mean};
}

Tensor gaussianKl(Graph& g, Tensor mu, Tensor log_sigma) {
  g.check(mu, "gaussianKl");
  g.check(log_sigma, "gaussianKl");
  if (g.tensor(mu).dtype != DType::F32 || g.tensor(log_sigma).dtype != DType::F32)
    throw ShapeError(g.describe("gaussianKl", {mu, log_sigma}) + ": mu and log_sigma must be f32");
  const Shape rows =
      ops::rowLossShape("gaussianKl", "mu", g.shape(mu), "log_sigma", g.shape(log_sigma));
  const int mean = g.output({1});
  const int per_row = g.output(rows, DType::F32, false, "gaussianKl.rows");
  g.addNode({OpKind::GaussianKl, {mu.id, log_sigma.id}, {mean, per_row}, {}, {}});
  return {mean};
}

namespace defs {
const OpDef kReconstructionLoss{
    .name = "reconstructionLoss",
    .inputs = ReconstructionLoss::kInputs,
    .outputs = ReconstructionLoss::kOutputs,
    .f32_outputs = (1u << ReconstructionLoss::mean) | (1u << ReconstructionLoss::rows),
    .backward = reconstructionBackward,
    .launch = launchReconstruction};
const OpDef kReconstructionLossBackward{.name = "reconstructionLossBackward",
                                        .inputs = ReconstructionLossBackward::kInputs,
                                        .outputs = ReconstructionLossBackward::kOutputs,
                                        .launch = launchReconstructionBackward};
const OpDef kGaussianKl{.name = "gaussianKl",
                        .inputs = GaussianKl::kInputs,
                        .outputs = GaussianKl::kOutputs,
                        .f32_outputs = (1u << GaussianKl::mean) | (1u << GaussianKl::rows),
                        .backward = klBackward,
                        .launch = launchKl};
const OpDef kGaussianKlBackward{.name = "gaussianKlBackward",
                                .inputs = GaussianKlBackward::kInputs,
                                .outputs = GaussianKlBackward::kOutputs,
                                .launch = launchKlBackward};
}  // namespace defs

}  // namespace vkgrad::graph
