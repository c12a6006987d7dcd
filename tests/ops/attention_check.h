// The attention op tests' shared checks (tests/ops/test_attention.cpp,
// test_attention_fragment.cpp, test_attention_gqa.cpp): one forward and backward of the
// attention kernels on fresh random data against the fp64 reference, with separate q, k, v
// tensors or read from one strided fused projection (B, T, (H+2*Hkv)*D) and the gradients
// written back into one such buffer.
#pragma once

#include <cstdint>
#include <vector>

#include "common/device_tensor.h"
#include "common/random.h"
#include "vkgrad/ops/attention.h"
#include "vkgrad/vk/context.h"
#include "vkgrad/vk/recorder.h"

namespace vkgrad::test {

// The largest |x_i|: the scale of dV's terms, on which dQ and dK are compared.
double maxAbs(const std::vector<float>& x);

// The problem: q (B,Tq,H,D), k and v (B,Tk,Hkv,D); Hkv divides H.
struct AttentionProblem {
  int64_t b, h, hkv, tq, tk, d;
  bool causal;
};

// How a check runs it and how close it must come.
struct AttentionRun {
  ops::AttentionVariant variant = ops::AttentionVariant::Shared;
  double tolerance = 2e-5;                   // allClose's normalised error (dQ, dK: on dV's scale)
  ops::DType inputs = ops::DType::F32;       // q, k, v and dout stored in this; the outputs f32
  bool half_exact = false;                   // inputs rounded to fp16 first (the fragment kernels)
  ops::Write write = ops::Write::Overwrite;  // gradients start random when accumulating
};

// Separate q, k, v, dout and outputs (outputs poisoned unless accumulated into), the
// reference computed from the values the tensors hold. record() may be called on a device
// that refuses the variant (to check the refusal); expectMatches() after a submitted record.
class AttentionCheck {
 public:
  AttentionCheck(vk::Context& context, Rng& rng, const AttentionProblem& p,
                 const AttentionRun& run);
  void record(vk::Recorder& rec) const;
  void expectMatches() const;
  // record, submit, expectMatches.
  void run() const;

 private:
  vk::Context& context_;
  AttentionProblem p_;
  AttentionRun run_;
  std::vector<float> o_, lse_, dq_, dk_, dv_;  // the reference, plus the gradients' start
  double dv_scale_ = 0;                        // the largest |dV| term
  DeviceTensor q_, k_, v_, dout_, o_dev_, lse_dev_, dq_dev_, dk_dev_, dv_dev_, scratch_;
};

// The same from one fused buffer: token rows (H+2*Hkv)*D apart, [q heads | k heads | v heads];
// the gradients into one poisoned buffer of that layout. Causal, Tq = Tk = t.
class FusedQkvCheck {
 public:
  FusedQkvCheck(vk::Context& context, Rng& rng, const AttentionProblem& p, const AttentionRun& run);
  void record(vk::Recorder& rec) const;
  void expectMatches() const;
  void run() const;

 private:
  ops::AttentionTensor part(const DeviceTensor& x, int64_t first_head, int64_t heads) const;

  vk::Context& context_;
  AttentionProblem p_;
  AttentionRun run_;
  int64_t row_;
  std::vector<float> o_, lse_, grad_;
  DeviceTensor qkv_, dout_, o_dev_, lse_dev_, grad_dev_, scratch_;
};

}  // namespace vkgrad::test
