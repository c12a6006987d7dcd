// Rotary position embedding as Hugging Face's Llama applies it (the "rotate_half" form, not
// interleaved pairs): in each (b, t, h) row of x (B,T,H,D), D even, channel pairs
// (i, i + D/2), i < D/2, are turned by the angle p * inv_freq[i], where p = t + offset is the
// row's sequence position and inv_freq[i] = theta^(-2i/D):
//   y[i] = x[i] cos - x[i + D/2] sin,   y[i + D/2] = x[i + D/2] cos + x[i] sin.
// The backward turns the gradient back: the same kernel by -angle. x and y may be f32, f16
// or bf16; the arithmetic is f32 and a 16-bit store rounds once (Hugging Face rounds cos and
// sin and each product to a 16-bit x's dtype: a bf16 result may differ by an ulp or two).
#pragma once

#include <vector>

#include "vkgrad/ops/tensor.h"

namespace vkgrad::ops {

// inv_freq (D/2) in f32 as PyTorch's Llama computes it, 1 / theta^(float(2i) / float(D)),
// the power correctly rounded (PyTorch's vectorised powf is within 1 ulp of it, so an
// element may differ from PyTorch's by an ulp: 6e-8 of the angle). Vulkan-free.
// Throws ShapeError for D odd or < 2, theta not finite or <= 1.
std::vector<float> ropeInvFreq(int64_t d, float theta);

// The shape rule, Vulkan-free (the graph builder uses it): x (B,T,H,D) with D even and
// B*T*H*D within 2^31; position, when given, (1); rotated_heads -1 or 1..H. Throws ShapeError
// "rope: x (2,3,4,5) needs an even head size D".
void ropeCheckShapes(const Shape& x, const Shape* position, int64_t rotated_heads = -1);

// x, y: (B,T,H,D); inv_freq: (D/2) f32 (ropeInvFreq); position: (1) u32, the sequence
// position of row t = 0 read on the device (cached decoding), or an empty view for 0.
// y = x turned by +angle, or by -angle when inverse (the backward, dy in, dx out); written or
// (Write::Accumulate) added. y may be x itself for an overwrite (then of x's dtype); other
// overlaps are refused. rotated_heads (1..H, or -1: all): only heads [0, rotated_heads) turn,
// the others are copied, so a fused q, k, v projection viewed as (B,T,Hq+2Hkv,D) gets its q
// and k heads rotated and its v heads passed through in one pass. Throws ShapeError naming
// the shapes before recording anything.
void rope(vk::Recorder& rec, const TensorView& x, const TensorView& inv_freq,
          const TensorView& position, const TensorView& y, bool inverse = false,
          Write w = Write::Overwrite, int64_t rotated_heads = -1);

}  // namespace vkgrad::ops
